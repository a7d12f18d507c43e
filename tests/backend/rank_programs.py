"""What each rank runs in the two-rank tests of the ``neuron`` process group (launched by two_ranks.py).

Run as ``python rank_programs.py FACETS OUT_DIR GROUP_TIMEOUT_S FAILURE_TIMEOUT_S`` under torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); each rank saves its results (host tensors) to OUT_DIR/rank<r>.pt.
The inputs and models are built here by pure functions, so the tests compute the CPU reference from the same ones.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

WORLD = 2
READY_FILE = "ready"  # the failure phase: rank 1 writes it once it is parked, for the test to kill it
FAILURES_FILE = "failures.pt"  # rank 0's outcome of the failure phase
HUNG_DONE_FILE = "hung-done"
LLAMA_DIR = "llama"  # the tiny Llama checkpoint the launcher saves for the hf_tp facet  # rank 0 writes it when its collective with the hung rank 1 has failed


def collective_input(rank: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A (4, 3) tensor that differs per rank, exact in bf16 (small integers and halves)."""
    return (torch.arange(12, dtype=torch.float32).reshape(4, 3) * (rank + 1) + rank / 2).to(dtype)


def mlp(out_features: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, out_features))


def batch(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(rows, 8, generator=g), torch.randn(rows, 4, generator=g)


def save_tiny_llama(path: Path) -> None:
    """A 2-layer Llama with random weights (4 heads, 2 KV heads: both split over 2 ranks), as safetensors."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                         num_hidden_layers=2, vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)


def llama_input_ids() -> torch.Tensor:
    return torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(0))


def _collectives(dev: torch.device, rank: int) -> dict:
    from neuron_backend import collectives

    out: dict = {}
    x = collective_input(rank).to(dev)
    for name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX),
                     ("premul_half", dist._make_nccl_premul_sum(0.5))):
        t = x.clone()
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{name}"] = t.cpu()
    t = collective_input(rank, torch.bfloat16).to(dev)
    dist.all_reduce(t)
    out["all_reduce_bf16"] = t.cpu()
    base = collective_input(rank).to(dev)
    dist.all_reduce(base.t())  # a non-contiguous view: the result must land in the base
    out["all_reduce_view"] = base.cpu()
    gathered = torch.empty(8, 3, device=dev)
    dist.all_gather_into_tensor(gathered, x)
    out["all_gather_into_tensor"] = gathered.cpu()
    parts = [torch.empty(4, 3, device=dev) for _ in range(WORLD)]
    dist.all_gather(parts, x)
    out["all_gather"] = torch.stack([p.cpu() for p in parts])
    shard = torch.empty(2, 3, device=dev)
    dist.reduce_scatter_tensor(shard, x)
    out["reduce_scatter_tensor"] = shard.cpu()
    b = x.clone()
    dist.broadcast(b, src=1)
    out["broadcast"] = b.cpu()
    a2a = torch.empty(4, 3, device=dev)
    dist.all_to_all_single(a2a, x)
    out["all_to_all_single"] = a2a.cpu()
    dist.barrier()
    out["errors"] = _expected_errors(dev, x)
    out["executed"] = collectives.executed_collectives()
    return out


def _expected_errors(dev: torch.device, x: torch.Tensor) -> dict[str, str]:
    """Collectives the real backend does not implement must fail with its error, not hang or run."""
    errors: dict[str, str] = {}
    attempts = {
        "send": lambda: dist.send(x, dst=1 - dist.get_rank()),
        "uneven_all_to_all": lambda: dist.all_to_all_single(
            torch.empty(4, 3, device=dev), x, output_split_sizes=[1, 3], input_split_sizes=[3, 1]),
    }
    sub = dist.new_group([0])  # every rank must create it; rank 0 is its only member
    if dist.get_rank() == 0:
        attempts["subgroup_barrier"] = lambda: dist.barrier(group=sub)
    for name, attempt in attempts.items():
        try:
            attempt()
            errors[name] = "no error"
        except Exception as exc:  # the type and message are what the test checks
            errors[name] = f"{type(exc).__name__}: {exc}"
    return errors


def _dtensor(dev: torch.device, rank: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (WORLD,))
    full = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(dev)
    d = distribute_tensor(full, mesh, [Shard(0)])
    w = distribute_tensor(torch.arange(12, dtype=torch.float32).reshape(6, 2).to(dev) / 10, mesh, [Replicate()])
    partial = DTensor.from_local(collective_input(rank).to(dev), mesh, [Partial()])
    return {
        "mesh_device": str(mesh.device_type),
        "shard0_local": d.to_local().cpu(),
        "shard0_to_replicate": d.redistribute(mesh, [Replicate()]).to_local().cpu(),
        "shard0_to_shard1": d.redistribute(mesh, [Shard(1)]).to_local().cpu(),
        "partial_to_replicate": partial.redistribute(mesh, [Replicate()]).to_local().cpu(),
        "matmul_full": (d @ w).full_tensor().cpu(),
    }


def _fsdp(dev: torch.device, rank: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("neuron", (WORLD,))
    model = mlp(4).to(dev)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = batch()
    rows = slice(2 * rank, 2 * rank + 2)  # each rank trains on its half of the global batch
    loss = nn.functional.mse_loss(model(x[rows].to(dev)), y[rows].to(dev))
    loss.backward()
    grads = {n: p.grad.full_tensor().cpu() for n, p in model.named_parameters()}
    opt.step()
    return {
        "param_type": type(next(model.parameters())).__name__,
        "local_loss": loss.detach().cpu(),
        "grads": grads,
        "params": {n: p.full_tensor().detach().cpu() for n, p in model.named_parameters()},
    }


def _tp(dev: torch.device, rank: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("neuron", (WORLD,))
    model = parallelize_module(mlp(4).to(dev), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x, y = batch()
    out = model(x.to(dev))
    nn.functional.mse_loss(out, y.to(dev)).backward()
    return {
        "out": out.detach().cpu(),
        "local_weight_shapes": {n: tuple(p.to_local().shape) for n, p in model.named_parameters()},
        "grads": {n: p.grad.full_tensor().cpu() for n, p in model.named_parameters()},
    }


def _hf_tp(out_dir: Path) -> dict:
    """Transformers' own tensor-parallel path: ``tp_plan="auto"`` (as a DistributedConfig, the non-deprecated
    spelling) with torchrun's variables; Transformers picks the backend for the device and initializes the group."""
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    model = AutoModelForCausalLM.from_pretrained(out_dir / LLAMA_DIR, distributed_config=DistributedConfig(tp_plan="auto"))
    weight = model.model.layers[0].self_attn.q_proj.weight
    with torch.no_grad():
        logits = model(llama_input_ids().to(weight.device)).logits
    return {
        "backend": dist.get_backend(),
        "weight": (type(weight).__name__, str(weight.device), str(weight.placements), tuple(weight.to_local().shape)),
        "logits": logits.cpu(),
    }


def _wait_for(path: Path, limit_s: float = 300.0) -> None:
    end = time.monotonic() + limit_s
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def _attempt(collective) -> dict:
    try:
        collective()
        return {"outcome": "completed", "collective": None}
    except Exception as exc:  # what the test checks: the error, and the collective it names
        return {"outcome": f"{type(exc).__name__}: {exc}", "collective": getattr(exc, "neuron_collective", None)}


def _failures(dev: torch.device, rank: int, out_dir: Path, timeout_s: float) -> dict:
    """Rank 1 first hangs (alive, connections open, outside the collective), then is killed by the test; rank 0
    meets each in an all_reduce and must get an error, not a hang. Rank 1 never returns from here."""
    hung_group, killed_group = (dist.new_group([0, 1], timeout=datetime.timedelta(seconds=timeout_s)) for _ in "ab")
    t = torch.ones(2, device=dev)
    dist.all_reduce(t, group=hung_group)  # both alive: these complete
    dist.all_reduce(t, group=killed_group)
    if rank == 1:
        _wait_for(out_dir / HUNG_DONE_FILE)
        (out_dir / READY_FILE).write_text("parked")
        time.sleep(600)  # the test kills this rank here
    outcome = {"hung": _attempt(lambda: dist.all_reduce(t, group=hung_group))}
    (out_dir / HUNG_DONE_FILE).write_text("")
    outcome["killed"] = _attempt(lambda: dist.all_reduce(t, group=killed_group))  # its peer is killed meanwhile
    return outcome


FACETS = {"collectives": _collectives, "dtensor": _dtensor, "fsdp": _fsdp, "tp": _tp}


def main(facets: str, out_dir: Path, group_timeout_s: float, failure_timeout_s: float) -> None:
    """Run the facets, save this rank's results, then (with ``failures`` among the facets) the failure phase."""
    import neuron_backend

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    names = facets.split(",")
    results: dict = {"errors": {}, "fallback_ops": {}}
    if names[0] == "hf_tp":  # Transformers creates the group itself (for the device it finds)
        neuron_backend.reset_fallback_ops()
        try:
            results["hf_tp"] = _hf_tp(out_dir)
        except Exception:
            results["errors"]["hf_tp"] = traceback.format_exc()
        results["fallback_ops"]["hf_tp"] = sorted(neuron_backend.fallback_ops())
    if not dist.is_initialized():
        dist.init_process_group(backend="neuron", device_id=torch.device("neuron", local_rank),
                                timeout=datetime.timedelta(seconds=group_timeout_s))
    dev = torch.device("neuron", torch.neuron.current_device())
    results.update(backend=dist.get_backend(), device=str(dev))
    for name in (n for n in names if n in FACETS):
        neuron_backend.reset_fallback_ops()
        try:
            results[name] = FACETS[name](dev, rank)
        except Exception:
            results["errors"][name] = traceback.format_exc()
        results["fallback_ops"][name] = sorted(neuron_backend.fallback_ops())
    torch.save(results, out_dir / f"rank{rank}.pt")
    if "failures" in names:
        torch.save(_failures(dev, rank, out_dir, failure_timeout_s), out_dir / FAILURES_FILE)
        os._exit(0)  # the group's peer is gone: skip the teardown that would wait for it
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
