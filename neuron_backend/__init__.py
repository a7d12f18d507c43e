"""neuron_backend: a simulated AWS Trainium (NeuronCore) PyTorch device named ``neuron``."""
from neuron_backend import registration

SIMULATED = registration.register()
if SIMULATED:
    from neuron_backend import dispatch  # noqa: F401
