"""Launch two ranks of rank_programs.py as torchrun would (one process per rank, env:// rendezvous on a TCPStore at
127.0.0.1), with a hard deadline, and prove afterwards that no process or port outlived the run.

Importable by name from the tests of this directory (``from two_ranks import launch``).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import torch
from rank_programs import FAILURES_FILE, LLAMA_DIR, READY_FILE, save_tiny_llama

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROGRAM = HERE / "rank_programs.py"
WORLD = 2


@dataclass
class Run:
    """What the two ranks left: exit codes (negative: killed by that signal), logs, and their saved results."""

    returncodes: list[int]
    logs: list[str]
    results: list[dict | None]
    failures: dict | None  # rank 0's outcome of the failure phase, when it ran
    pids: list[int]
    port: int
    out_dir: Path
    timed_out: bool
    killed_by_test: list[int] = field(default_factory=list)

    def describe(self) -> str:
        return "\n".join(f"--- rank {r} (exit {c}) ---\n{log[-6000:]}"
                         for r, (c, log) in enumerate(zip(self.returncodes, self.logs, strict=True)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, port: int) -> dict[str, str]:
    """torchrun's variables for ``rank`` of a 2-process job on this host, plus the device settings of the tests."""
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD), "LOCAL_WORLD_SIZE": str(WORLD),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "PYTHONPATH": str(REPO),
        # Exact fp32 matmuls (no compiler bf16 auto-cast), so device results differ from the CPU reference only
        # by summation order. CPU fallback on (the real device's default), recorded per facet: the tests check
        # that no collective falls back. One intra-op thread per rank on a 2-core box.
        "NEURON_AUTOCAST_MATMUL": "0", "NEURON_CPU_FALLBACK": "1", "OMP_NUM_THREADS": "1",
    })
    env.pop("GLOO_SOCKET_IFNAME", None)
    return env


def launch(facets: str, out_dir: Path, *, deadline_s: float, group_timeout_s: float = 60.0,
           failure_timeout_s: float = 5.0,
           while_running: Callable[[list[subprocess.Popen], Path], list[int]] | None = None) -> Run:
    """Run ``facets`` on two ranks; kill both (whole process groups) at ``deadline_s``; never leave one behind.

    ``while_running(procs, out_dir)`` is polled until both exit; it returns the ranks it has killed.
    """
    port = free_port()
    procs: list[subprocess.Popen] = []
    log_paths = [out_dir / f"rank{r}.log" for r in range(WORLD)]
    killed: list[int] = []
    timed_out = False
    try:
        for rank in range(WORLD):
            with open(log_paths[rank], "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, str(PROGRAM), facets, str(out_dir), str(group_timeout_s), str(failure_timeout_s)],
                    env=rank_env(rank, port), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: the kill below reaches every descendant
                ))
        end = time.monotonic() + deadline_s
        while any(p.poll() is None for p in procs):
            if time.monotonic() > end:
                timed_out = True
                break
            if while_running is not None:
                killed = sorted(set(killed) | set(while_running(procs, out_dir)))
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    def load(name: str):
        path = out_dir / name
        return torch.load(path, weights_only=False) if path.exists() else None

    return Run(
        returncodes=[p.returncode for p in procs],
        logs=[path.read_text(errors="replace") for path in log_paths],
        results=[load(f"rank{rank}.pt") for rank in range(WORLD)], failures=load(FAILURES_FILE),
        pids=[p.pid for p in procs], port=port, out_dir=out_dir, timed_out=timed_out, killed_by_test=killed,
    )


def leaks(run: Run) -> list[str]:
    """Anything the run left behind: a live rank or descendant of it, or a listener still on the store's port."""
    found = []
    for pid in run.pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"rank process {pid} is alive")
        except psutil.NoSuchProcess:
            pass
    mine = psutil.Process().children(recursive=True)
    found += [f"descendant {p.pid} ({' '.join(p.cmdline()[:3])}) is alive" for p in mine
              if p.status() != psutil.STATUS_ZOMBIE and "rank_programs.py" in " ".join(p.cmdline())]
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no leak; a listener is
        try:
            s.bind(("127.0.0.1", run.port))
        except OSError:
            found.append(f"port {run.port} (the TCPStore) is still bound")
    return found


ALL_FACETS = "hf_tp,collectives,dtensor,fsdp,tp,failures"
FAILURE_TIMEOUT_S = 5.0  # the hung-peer group's timeout: the bound on the survivor's wait


def kill_parked_rank(procs: list[subprocess.Popen], out_dir: Path) -> list[int]:
    """The failure phase's killer: SIGKILL rank 1 (its whole process group) once it reports itself parked."""
    if (out_dir / READY_FILE).exists() and procs[1].poll() is None:
        os.killpg(procs[1].pid, signal.SIGKILL)
        return [1]
    return []


def scratch_dir(prefix: str) -> Path:
    """A directory for one run's results and logs, removed when the test session ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@functools.cache
def shared_run() -> Run:
    """One two-rank run of every facet then the failure phase, shared by the test modules of this directory (ranks
    cost seconds of CPU to start). Transformers creates the group (hf_tp comes first); the failure phase has
    groups of its own with a short timeout."""
    out_dir = scratch_dir("neuron-ranks-")
    save_tiny_llama(out_dir / LLAMA_DIR)
    # The deadline is a hang guard (a hung collective is bounded by group_timeout_s): 300 s was met by slow, not hung,
    # ranks at load 15-20 under pytest -n 2 (every facet still running, all 17 tests of the 6 modules failed).
    return launch(ALL_FACETS, out_dir, deadline_s=540, group_timeout_s=60,
                  failure_timeout_s=FAILURE_TIMEOUT_S, while_running=kill_parked_rank)


def facet(run: Run, name: str) -> list[dict]:
    """Both ranks' results of one facet; fails with the ranks' logs and tracebacks if the run or the facet failed."""
    assert not run.timed_out, f"the ranks were killed at the deadline\n{run.describe()}"
    assert all(r is not None for r in run.results), run.describe()
    errors = {r: res["errors"][name] for r, res in enumerate(run.results) if name in res["errors"]}
    assert not errors, "\n".join(f"rank {r}:\n{tb}" for r, tb in errors.items())
    return [res[name] for res in run.results]
