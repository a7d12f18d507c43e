"""The ``torch.backends`` entry point PyTorch calls at the end of ``import torch``: a module of its own, so that the
entry point resolves even while ``neuron_backend`` itself is still being imported (it imports torch first).

Importing this module imports the package (which registers the simulated device, or stands aside for a real
torch-neuronx) unless the package's import is already under way, in which case that import finishes the registration.
"""

from __future__ import annotations


def load() -> None:
    """Nothing left to do: importing ``neuron_backend.autoload`` ran the package's registration, or the package's own
    import (which led to ``import torch``) runs it as it continues; the real package's ``_autoload`` likewise relies on
    its import (torch_neuronx/__init__.py in parmoham-aws/test-repo-parmoham @ 67d8dc4a52b14ff2d6e5023ba8487b41271e982e)."""
