"""``torch.neuron``: the device module PyTorch and Accelerate call for a PrivateUse1 device (like torch.cuda).

Counts, current core, seeding and the memory statistics of memory.py, per NeuronCore.
"""

from __future__ import annotations

import torch

from neuron_backend import memory
from neuron_backend.config import CONFIG
from neuron_backend.hardware import profiles
from neuron_backend.tensor import _C


def _index(device: int | str | torch.device | None) -> int:
    if device is None:
        return _C.current()
    if isinstance(device, int):
        idx = device
    else:
        d = torch.device(device)
        if d.type != "neuron":
            raise ValueError(f"expected a neuron device, got {d}")
        idx = _C.current() if d.index is None else d.index
    if not 0 <= idx < CONFIG.cores:
        raise RuntimeError(f"invalid device ordinal neuron:{idx}: this machine has {CONFIG.cores} NeuronCores")
    return idx


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def _lazy_init() -> None:
    return None


def device_count() -> int:
    return CONFIG.cores


def current_device() -> int:
    return _C.current()  # the C++ guard's current core (also what torch.accelerator and the autograd engine set)


def set_device(device: int | str | torch.device) -> None:
    _C.set_current(_index(device))


def synchronize(device: int | str | torch.device | None = None) -> None:
    """Host and device share one timeline in the simulation: nothing is ever in flight."""
    _index(device)


def manual_seed(seed: int) -> None:
    # Device random numbers are drawn from the host generator (the data lives on the host). Seed it directly:
    # torch.manual_seed itself calls manual_seed_all here, so calling it back would recurse.
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    torch.default_generator.manual_seed(int(seed))


def seed() -> None:
    torch.seed()


def initial_seed() -> int:
    return torch.initial_seed()


def get_rng_state(device: int | str | torch.device | None = None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: int | str | torch.device | None = None) -> None:
    torch.set_rng_state(state)


def get_rng_state_all() -> list[torch.Tensor]:
    """One state per core (accelerate 1.15.0 checkpointing.py:172 saves it); device numbers come from the host
    generator, so every core's state is that generator's."""
    return [torch.get_rng_state() for _ in range(CONFIG.cores)]


def set_rng_state_all(states: list[torch.Tensor]) -> None:
    """Restore what get_rng_state_all saved (accelerate 1.15.0 checkpointing.py:311): they are one host state."""
    if states:
        torch.set_rng_state(states[0])


def memory_allocated(device: int | str | torch.device | None = None) -> int:
    return memory.memory_allocated(_index(device))


def max_memory_allocated(device: int | str | torch.device | None = None) -> int:
    return memory.max_memory_allocated(_index(device))


def memory_reserved(device: int | str | torch.device | None = None) -> int:
    return memory.memory_reserved(_index(device))


def max_memory_reserved(device: int | str | torch.device | None = None) -> int:
    return memory.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: int | str | torch.device | None = None) -> None:
    memory.reset_peak_memory_stats(_index(device))


def mem_get_info(device: int | str | torch.device | None = None) -> tuple[int, int]:
    return memory.mem_get_info(_index(device))


def empty_cache() -> None:
    memory.empty_cache()


def get_device_name(device: int | str | torch.device | None = None) -> str:
    hw = profiles.load(CONFIG.profile, CONFIG.switches).hardware
    return f"{hw.neuroncore} (simulated {hw.generation}, LNC={CONFIG.lnc}) #{_index(device)}"


class DeviceProperties:
    """``torch.neuron.get_device_properties``' result: ``name`` and ``total_memory`` (bytes), as the real backend's
    NeuronDeviceProperties (torch_neuronx/neuron.py:287 and csrc/core/NeuronBindings.cpp:249-252,376-400 at
    parmoham-aws/test-repo-parmoham@98154b867aa24562a3213e520d9ad7fd41032291, pre-beta, INDICATIVE). The real name
    is the EC2 instance type, which a simulation has none of: the simulated device's name stands in for it."""

    def __init__(self, name: str, total_memory: int) -> None:
        self.name = name
        self.total_memory = total_memory

    def __repr__(self) -> str:
        return f"NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})"


def get_device_properties(device: int | str | torch.device | None = None) -> DeviceProperties:
    """Name and memory of one device (TRL asks for it whenever a trainer is built on neuron)."""
    return DeviceProperties(get_device_name(device), CONFIG.memory_per_core)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


class device:  # noqa: N801 - mirrors torch.cuda.device
    """Context manager that makes ``idx`` the current NeuronCore."""

    def __init__(self, idx: int | str | torch.device) -> None:
        self.idx = _index(idx)
        self.prev = _C.current()

    def __enter__(self) -> None:
        self.prev = _C.current()
        set_device(self.idx)

    def __exit__(self, *exc) -> None:
        set_device(self.prev)


# --- streams and events (neuron_backend/streams.py), for torch.distributed (FSDP2, DTensor): begin ---
from neuron_backend import streams as _streams  # noqa: E402  (after _index, which it is bound to below)

_streams.bind(_index)
Stream = _streams.Stream
Event = _streams.Event
StreamContext = _streams.StreamContext
current_stream = _streams.current_stream
default_stream = _streams.default_stream
set_stream = _streams.set_stream
stream = _streams.stream
# --- streams and events: end ---
