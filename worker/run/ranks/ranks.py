"""One rank of the fsdp/tp checks' 2-process group: ``python -m worker.run.ranks.ranks SPEC.json``, started by
worker/run/ranks/group.py with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE).

It runs each requested check on its device, attributes any failure where it happens, and saves one result per check
to OUT_DIR/rank<r>-<check>.pt (host tensors and plain data) as soon as that check ends.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers.distributed import DistributedConfig

from worker.judge.attribution import attribute, collective_of
from worker.run.process.capture import process_local_bar_lock
from worker.run.process.devices import process_device
from worker.run.process.pool import IDLE_PROCESS_NAME
from worker.run.reference.inputs import spec_for
from worker.run.reference.reference import BATCH, LR, load_model, model_class_for

WORLD = 2
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PR_SET_NAME = 15  # linux/prctl.h: the calling thread's comm (15 bytes), what /proc/PID/comm and psutil's name() read
BUSY_NAME = "compat-rank"


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this rank when the process that started it dies (Linux prctl PR_SET_PDEATHSIG),
    so a pool worker killed at its limit takes its ranks with it even if nobody is left to kill them."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux: the launcher's own kill is the only guard
        pass


def rank_inputs(inputs: dict[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor]:
    """This rank's half of the global batch: sample ``rank`` of BATCH (MusicGen's rows per sample stay together)."""
    rows = inputs["input_ids"].shape[0] // BATCH
    out = {}
    for key, value in inputs.items():
        if key == "prompt":
            continue
        per = rows if value.shape[0] == BATCH * rows else 1
        out[key] = value[rank * per:(rank + 1) * per]
    return out


def _full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().to("cpu")


def fsdp_step(path: Path, dev: torch.device, inputs: dict[str, torch.Tensor], rank: int) -> dict[str, Any]:
    """FSDP2: ``fully_shard`` each block Transformers keeps whole (``_no_split_modules``) and then the root, one
    AdamW step on this rank's half of the batch; loss, gathered gradients and gathered parameters after the step."""
    model = load_model(path, str(dev))
    mesh = init_device_mesh(dev.type, (WORLD,))
    blocks = set(getattr(model, "_no_split_modules", None) or [])
    # A parameter registered under two modules (tied embeddings) must sit in one FSDP group: "For shared/tied
    # parameters, use fully_shard([module_a, module_b])" (torch 2.13, torch/distributed/fsdp/_fully_shard/_fsdp_state.py). A
    # block holding one is left to the root's group.
    names: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        names[id(p)] = names.get(id(p), 0) + 1
    tied = {pid for pid, n in names.items() if n > 1}
    # Outermost blocks only: _no_split_modules may name nested classes (MBartDecoderLayer and its MBartAttention,
    # MambaBlock and its MambaMixer), and fully_shard on a child of a sharded block meets parameters that are
    # DTensors already ("Invariant encountered: value was None", FSDP2's TP path).
    chosen: list[str] = []
    for name, module in model.named_modules():
        if (name and type(module).__name__ in blocks and not any(name.startswith(c + ".") for c in chosen)
                and not any(id(p) in tied for p in module.parameters())):
            chosen.append(name)
    modules = dict(model.named_modules())
    for name in chosen:
        fully_shard(modules[name], mesh=mesh)
    sharded = len(chosen)
    fully_shard(model, mesh=mesh)
    local = {k: v.to(dev) for k, v in rank_inputs(inputs, rank).items()}
    spec = spec_for(model.config)
    model.train(spec.train_mode)
    extra = {"pixel_values": local["pixel_values"]} if "pixel_values" in local else {}
    loss = model(input_ids=local["input_ids"], attention_mask=local["attention_mask"],
                 labels=local.get("labels", local["input_ids"]), use_cache=False, **extra).loss
    loss.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.cat([(_full(p.grad) if p.grad is not None else torch.zeros(p.shape)).reshape(-1) for p in params])
    torch.optim.AdamW(params, lr=LR).step()
    updated = torch.cat([_full(p).reshape(-1) for p in params])
    return {"loss": loss.detach().to("cpu").reshape(1), "grads": grads, "params": updated,
            "sharded_blocks": sharded, "param_type": type(params[0]).__name__}


def tp_forward(path: Path, dev: torch.device, inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Transformers' own tensor parallelism: ``from_pretrained(..., distributed_config=DistributedConfig(
    tp_plan="auto"))`` over the existing group (transformers/distributed/utils.py ``_ensure_torch_distributed``
    keeps an initialized one); forward logits of the whole batch, gathered."""
    model = model_class_for(path).from_pretrained(path, dtype=torch.float32, use_safetensors=True,
                                                  distributed_config=DistributedConfig(tp_plan="auto")).eval()
    first = next(model.parameters())
    with torch.no_grad():
        out = model(input_ids=inputs["input_ids"].to(dev), attention_mask=inputs["attention_mask"].to(dev),
                    use_cache=False)
    return {"logits": _full(out.logits).float(), "param_type": type(first).__name__,
            "param_device": str(first.device)}


def _failure(exc: BaseException) -> dict[str, Any]:
    att = attribute(exc)
    collective = collective_of(exc)
    return {"status": str(att.status), "blocking_op": att.blocking_op or collective,
            "error": att.error.model_dump(), "collective": collective}


def main(spec_path: Path) -> None:
    die_with_parent()
    spec = json.loads(spec_path.read_text())
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    out_dir, path = Path(spec["out_dir"]), Path(spec["path"])
    device = process_device(spec["device"])  # neuron: registers the simulated device and its "neuron" backend
    kind = torch.device(device.torch_device).type
    dev = torch.device(kind, local_rank) if kind != "cpu" else torch.device("cpu")
    inputs = torch.load(spec["inputs"], weights_only=True)
    store = dist.FileStore(spec["store"], WORLD)
    print(f"[rank {rank}] {spec['architecture']} on {dev}: init group", flush=True)
    dist.init_process_group(backend="neuron" if kind == "neuron" else "gloo", store=store, rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=spec["group_timeout_s"]))
    torch.manual_seed(spec["seed"])
    for check in spec["checks"]:
        print(f"[rank {rank}] {check}", flush=True)
        device.reset_fallback()
        t0 = time.perf_counter()
        try:
            value = fsdp_step(path, dev, inputs, rank) if check == "fsdp" else tp_forward(path, dev, inputs)
            result: dict[str, Any] = {"status": "ok", "value": value}
        except Exception as exc:  # noqa: BLE001 - every failure is this rank's result
            traceback.print_exc()
            result = _failure(exc)
        result.update(duration_s=time.perf_counter() - t0, fallback_ops=device.fallback_ops())
        torch.save(result, out_dir / f"rank{rank}-{check}.pt")
        print(f"[rank {rank}] {check}: {result['status']}", flush=True)
        if result["status"] != "ok":
            # The peer may be waiting in a collective this rank will never join: leave without the teardown
            # that would wait for it (the launcher stops the group).
            sys.stdout.flush()
            os._exit(3)
    dist.destroy_process_group()


def _name_process(name: str) -> None:
    """Set this process's comm (its main thread's name): the pool's memory watch skips a rank named idle."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except OSError:  # not Linux: an idle rank keeps counting in the task's memory, as a busy one does
        pass


def _start_rank(env: dict[str, str]) -> None:
    """A new session, and ``env`` (the launcher's environment at launch, group.launch_env, plus torchrun's variables)
    as this rank's whole environment: not the forkserver's, which is that of the moment the server started."""
    os.setsid()
    process_local_bar_lock()  # this rank leaves by os._exit: a named semaphore made here would never be released
    for name in set(os.environ) - set(env):
        del os.environ[name]
    os.environ.update(env)
    torch.set_num_threads(1)  # one intra-op thread per rank (two ranks share the machine's cores)


def _log_to(log: Path) -> None:
    """This rank's output (fds 1 and 2, and Python's streams) goes to ``log`` from now on."""
    sys.stdout.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = sys.stderr = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def forked_main(rank: int, spec_path: Path, log: Path, env: dict[str, str]) -> None:
    """A rank started from a forkserver (group.py): its own session, torchrun's variables, its output to ``log``;
    exits with main's outcome (0, or non-zero with the traceback in the log)."""
    _start_rank(env)
    _log_to(log)
    code = 0
    try:
        main(spec_path)
    except BaseException:  # noqa: BLE001 - printed to the rank's log; the exit code says it failed
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    os._exit(code)


def served_main(rank: int, conn: Any, env: dict[str, str]) -> None:
    """A warm rank (group.py's warm pair): runs one job per (spec, log) received on ``conn``, answering ``"ok"``
    after each; a job that fails in any way ends the process as ``forked_main`` would (the launcher then replaces
    the pair, so nothing of a failed architecture reaches the next). EOF or ``None`` on ``conn``: exit 0."""
    _start_rank(env)
    _name_process(IDLE_PROCESS_NAME)  # between architectures its memory is no task's (pool.tree_rss_mb)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            job = None
        if job is None:
            os._exit(0)
        _name_process(BUSY_NAME)
        spec_path, log = job
        _log_to(Path(log))
        try:
            main(Path(spec_path))
        except BaseException:  # noqa: BLE001 - printed to the job's log; the exit code says it failed
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        sys.stdout.flush()
        _name_process(IDLE_PROCESS_NAME)  # before answering: once the launcher has the answer, the rank is idle
        conn.send("ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
