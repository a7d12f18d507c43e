"""Launch the 2-rank process group of the fsdp/tp checks from the architecture's own (pool) process, and stop it.

Ranks rendezvous through a FileStore in a scratch directory (no port to choose, none left bound), each in its own
session so one kill reaches its descendants; a rank that fails or dies stops the group, a deadline stops it too,
and every rank is dead and reaped when ``run_group`` returns. Each rank's output is kept for the records' log.

Ranks start from a multiprocessing forkserver (a child of this process that imported torch, Transformers and the
rank program once and never ran a kernel): a fresh interpreter per rank, as torchrun starts them, cost 15-30 s of
imports per architecture on the loaded 2-core machine. Forking the warm architecture process itself was tried and
hung in the fsdp step (cause not established; OpenMP/autograd state copied by fork is the usual suspect); the
forkserver is single-threaded and clean. It lives as long as this process and dies with it (Pool kills a worker's
descendants; on its own it exits when its parent's end of the pipe closes).

The pair stays warm across architectures (issue 20): after a job in which both ranks answered, it waits for the next
architecture's job instead of exiting; each job still gets its own scratch folder, FileStore, process group, logs and
seed. Any other end (a failed check, a dead rank, the deadline) kills the pair as before and the next job starts a
new one, so a failure never carries into another architecture; a pair is also retired after WARM_JOBS jobs.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from worker.run.process.environ import environ_set
from worker.run.ranks import ranks

WORLD = 2
SERVER_PRELOAD = ("torch._dynamo", "torch._functorch.aot_autograd", "torch._dynamo.backends.common")
# After one rank fails, how long its peer gets to reach the same error and save it before it is killed.
PEER_GRACE_S = 5.0
POLL_S = 0.05
# Jobs a warm pair serves before it is retired: bounds the state and memory one pair can gather across architectures
# (decision caches, Transformers' imported model modules, allocator caches) while keeping the start cost rare.
WARM_JOBS = 32
AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"  # torch's switch for device backends' entry points


@dataclass
class GroupRun:
    """What a group left: each rank's exit code (negative: killed by that signal), log and saved results."""

    returncodes: list[int]
    logs: list[str]
    results: list[dict[str, dict[str, Any]]]  # rank -> check -> its saved result
    pids: list[int]
    timed_out: bool = False
    duration_s: float = 0.0
    killed: list[int] = field(default_factory=list)  # ranks the launcher had to kill

    def describe(self) -> str:
        return "\n".join(f"--- rank {r} (exit {c}) ---\n{log[-6000:]}"
                         for r, (c, log) in enumerate(zip(self.returncodes, self.logs, strict=True)))


def rank_env(rank: int) -> dict[str, str]:
    """torchrun's variables for ``rank`` of a 2-process job on this host."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD), "LOCAL_WORLD_SIZE": str(WORLD),
            "OMP_NUM_THREADS": "1"}


def launch_env() -> dict[str, str]:
    """This process's environment now, as a rank must see it (ranks.py makes its own environment exactly this, plus
    ``rank_env``): the forkserver keeps the environment of the moment it started, and a warm pair that of its start,
    so without it a variable set later (a block's NEURON_SWITCHES or NEURON_CPU_OPS in ``--jobs 0``, a test's
    settings) never reached a rank, and one unset later still did."""
    return {**os.environ, AUTOLOAD: "0"}


def _context() -> mp.context.BaseContext:
    ctx = mp.get_context("forkserver")
    # Imported once, in the server: the rank program, and what importing the simulated device pulls in (its torch.compile
    # backend: dynamo and AOT Autograd, ~0.9 s that every rank of every group paid again). Not neuron_backend itself:
    # importing it registers the device, and a CPU group in a process with `neuron` registered puts Transformers'
    # tp_plan="auto" on it. These imports start no thread and run no kernel, so the server stays clean to fork.
    ctx.set_forkserver_preload(["worker.run.ranks.ranks", *SERVER_PRELOAD])
    return ctx


@contextlib.contextmanager
def _children_allowed() -> Iterator[None]:
    """Start a rank: without the device's autoload (below), and allowed from a daemonic process.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 (torch 2.13.0 torch/__init__.py _import_device_backends) for the forkserver this
    start may launch: with the simulated device autoloaded into the server, every rank forked from it has ``neuron``
    registered, and a CPU group's Transformers tp_plan="auto" binds to it (transformers 5.23.0
    distributed/utils.py:241 takes ``torch._C._get_accelerator()``). A neuron rank registers the device itself when
    it resolves its device (process_device imports neuron_backend).

    Let a daemonic process (a pool worker: Pool starts them daemonic) start the ranks. multiprocessing refuses
    ("daemonic processes are not allowed to have children", multiprocessing/process.py BaseProcess.start) because
    a daemonic process dies abruptly with its parent and would orphan them; here nothing is orphaned: Pool kills a
    worker's descendants with it, the forkserver exits when its parent's pipe closes (multiprocessing/forkserver.py
    main), and each rank asks for SIGKILL when its parent dies (ranks.die_with_parent)."""
    config = mp.current_process()._config  # noqa: SLF001 - the flag BaseProcess.start checks
    daemon = config.get("daemon")
    config["daemon"] = False
    try:
        with environ_set(AUTOLOAD, "0"):
            yield
    finally:
        if daemon is None:
            config.pop("daemon", None)
        else:
            config["daemon"] = daemon


def _kill(proc: mp.process.BaseProcess) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the rank's whole session (its own children too)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.is_alive():  # killed before it led its own session
        proc.kill()


class _Pair:
    """Two warm ranks (ranks.served_main) of one device, each with its end of a pipe for jobs and answers."""

    def __init__(self, device: str) -> None:
        ctx = _context()
        self.device = device
        self.env = launch_env()
        self.jobs = 0
        self.procs: list[mp.process.BaseProcess] = []
        self.conns: list[Any] = []
        for rank in range(WORLD):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=ranks.served_main, name=f"compat-rank{rank}",
                               args=(rank, child, {**self.env, **rank_env(rank)}))
            with _children_allowed():
                proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.procs)

    def close(self) -> None:
        for proc in self.procs:
            _kill(proc)
            proc.join()
        for conn in self.conns:
            conn.close()


_PAIRS: dict[str, _Pair] = {}


def _warm_pair(device: str) -> _Pair:
    """The device's warm pair, replaced when it died or when this process's environment changed since it started."""
    pair = _PAIRS.get(device)
    if pair is None or not pair.alive() or pair.env != launch_env():
        if pair is not None:
            pair.close()
        pair = _PAIRS[device] = _Pair(device)
    return pair


@atexit.register
def close_pairs() -> None:
    """Stop every warm pair of this process (they would also exit on their own once its pipes close)."""
    while _PAIRS:
        _PAIRS.popitem()[1].close()


def run_group(architecture: str, path: Path, device: str, checks: list[str], inputs: dict[str, torch.Tensor], *,
              seed: int, deadline_s: float, group_timeout_s: float, while_running: Any = None,
              warm: bool = True) -> GroupRun:
    """Run ``checks`` (fsdp, tp) for the checkpoint at ``path`` on two ranks of ``device``; never leaves a rank
    that failed, and leaves a warm pair only after a job both ranks finished (``warm=False``: fresh ranks that exit).

    ``while_running(procs, scratch)`` is polled while the ranks run (tests use it to kill one mid-check)."""
    scratch = Path(tempfile.mkdtemp(prefix="compat-group-"))
    procs: list[mp.process.BaseProcess] = []
    logs = [scratch / f"rank{r}.log" for r in range(WORLD)]
    killed: list[int] = []
    timed_out = False
    pair: _Pair | None = None
    answered = [False] * WORLD
    t0 = time.monotonic()
    try:
        torch.save(inputs, scratch / "inputs.pt")
        spec = {"architecture": architecture, "path": str(path), "device": device, "checks": checks,
                "seed": seed, "out_dir": str(scratch), "inputs": str(scratch / "inputs.pt"),
                "store": str(scratch / "store"), "group_timeout_s": group_timeout_s}
        (scratch / "spec.json").write_text(json.dumps(spec))
        if warm:
            pair = _warm_pair(device)
            procs = list(pair.procs)
            for rank, conn in enumerate(pair.conns):
                conn.send((str(scratch / "spec.json"), str(logs[rank])))
        else:
            ctx = _context()
            for rank in range(WORLD):
                proc = ctx.Process(target=ranks.forked_main, name=f"compat-rank{rank}",
                                   args=(rank, scratch / "spec.json", logs[rank], {**launch_env(), **rank_env(rank)}))
                with _children_allowed():
                    proc.start()
                procs.append(proc)
        end = t0 + deadline_s
        failed_at: float | None = None
        while any(p.is_alive() for p in procs):
            if pair is not None:
                for rank, conn in enumerate(pair.conns):
                    if not answered[rank] and conn.poll():
                        try:
                            answered[rank] = conn.recv() == "ok"
                        except (EOFError, OSError):  # died mid-answer: its exit code tells the rest
                            pass
                if all(answered):
                    break
            now = time.monotonic()
            if now > end:
                timed_out = True
                break
            if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                failed_at = now  # one rank is gone: its peer cannot finish a collective with it
            if failed_at is not None and now - failed_at > PEER_GRACE_S:
                break
            if while_running is not None:
                while_running(procs, scratch)
            time.sleep(POLL_S)
    finally:
        keep = pair is not None and all(answered) and not timed_out and pair.alive()
        if keep:
            pair.jobs += 1
            returncodes = [0] * WORLD  # this job's outcome: both ranks finished it; they wait for the next one
            if pair.jobs >= WARM_JOBS:
                _PAIRS.pop(device, None)
                pair.close()
        else:
            if pair is not None:
                _PAIRS.pop(device, None)
            for rank, proc in enumerate(procs):
                if proc.is_alive() and not answered[rank]:
                    killed.append(rank)
                _kill(proc)  # also reaches anything a finished rank left in its session
                proc.join()
            if pair is not None:
                for conn in pair.conns:
                    conn.close()
            # A warm rank that finished its job and was then stopped with its failed peer exited 0 for this job.
            returncodes = [0 if answered[r] else p.exitcode for r, p in enumerate(procs)]
        results = [{c: _load(scratch / f"rank{r}-{c}.pt") for c in checks} for r in range(WORLD)]
        texts = [p.read_text(errors="replace") if p.exists() else "" for p in logs]
        shutil.rmtree(scratch, ignore_errors=True)  # the FileStore goes with it
    return GroupRun(returncodes=returncodes, logs=texts,
                    results=[{c: v for c, v in r.items() if v is not None} for r in results],
                    pids=[p.pid for p in procs], timed_out=timed_out, duration_s=time.monotonic() - t0,
                    killed=killed)


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        return torch.load(path, weights_only=False)
    except Exception:  # noqa: BLE001 - a rank killed mid-write leaves a torn file: no result
        return None
