"""Build a tiny model checkpoint for one architecture: shrink, bound, seeded random init, save as safetensors.

The checkpoint is what every check loads back with ``from_pretrained(..., device_map=DEVICE)``, the user's path.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PretrainedConfig

from compat.results import ArchitectureEntry
from worker.build.tiny_config import TinyConfigError, model_class, shrink

WEIGHTS_FILE = "model.safetensors"


@dataclass
class BuiltModel:
    """A tiny checkpoint on disk and what it holds."""

    path: Path
    config: PretrainedConfig
    n_params: int
    model_class: str


def build_model(entry: ArchitectureEntry, *, seed: int = 0) -> tuple[torch.nn.Module, PretrainedConfig, int]:
    """The tiny model in memory (float32, CPU, eval mode), seeded; refuses oversize configs before allocating."""
    cls = model_class(entry)
    config = shrink(entry)  # refuses a config over COMPAT_MAX_TINY_PARAMS (counted on the meta device) before this
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = cls._from_config(copy.deepcopy(config), dtype=torch.float32)
        except Exception as exc:  # noqa: BLE001 - an init failure is a build failure with a reason
            raise TinyConfigError(f"cannot initialise {cls.__name__}: {type(exc).__name__}: {exc}") from exc
    model.eval()
    # The count shrink bounded, read off the model itself (a second meta instantiation cost as much as the init).
    return model, model.config, sum(p.numel() for p in model.parameters())


def build_checkpoint(entry: ArchitectureEntry, out_dir: Path, *, seed: int = 0) -> BuiltModel:
    """Write the tiny ``entry`` model to ``out_dir`` (config.json + model.safetensors); deterministic per seed."""
    model, config, n_params = build_model(entry, seed=seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(out_dir)
    if not (out_dir / WEIGHTS_FILE).exists() and not list(out_dir.glob("*.safetensors")):
        raise TinyConfigError(f"save_pretrained wrote no safetensors file for {entry.name}")
    return BuiltModel(path=out_dir, config=config, n_params=n_params, model_class=type(model).__name__)
