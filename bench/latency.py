"""The API benchmarks' shared latency loop: serve the app with uvicorn in its own process, time GETs under bounded
concurrent load from another, and the percentiles. Used by bench_api.py and bench_lookup.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(database_url: str, start_timeout_s: float = 90.0) -> Iterator[str]:
    """uvicorn serving ``cli.serve:create_app`` over ``database_url`` on a free port; yields its base URL once
    ``/healthz`` answers, and stops it on exit."""
    import httpx

    port = free_port()
    env = {**os.environ, "COMPAT_DATABASE_URL": database_url}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "cli.serve:create_app", "--factory", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("server did not start")
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def timed_gets(base: str, rows: dict[str, tuple[Callable[[], str], int]], requests: int,
               concurrency: int, warm: int = 10) -> dict[str, dict[str, float]]:
    """Per row (name -> (next path, expected status)): ``warm`` untimed GETs, then ``requests`` timed ones with
    ``concurrency`` in flight; p50/p99 in ms. A response with another status stops the benchmark."""
    import httpx

    out = {}
    with httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:
        for name, (path, status) in rows.items():
            for _ in range(warm):  # warm connections (and, for fixed paths, the app's caches)
                client.get(path())

            def one(_: int, path: Callable[[], str] = path, status: int = status) -> float:
                target = path()
                t = time.perf_counter()
                r = client.get(target)
                if r.status_code != status:
                    raise SystemExit(f"{target}: {r.status_code}, expected {status}")
                return (time.perf_counter() - t) * 1000

            with ThreadPoolExecutor(concurrency) as pool:
                lat = list(pool.map(one, range(requests)))
            out[name] = {"p50_ms": round(pct(lat, 0.5), 1), "p99_ms": round(pct(lat, 0.99), 1), "n": len(lat)}
    return out


def load_process(script: str, base: str, requests: int, concurrency: int, *extra: str) -> dict:
    """Run ``script --drive BASE`` as the load process (so the load does not share the server's interpreter) and
    return the JSON it prints."""
    load = subprocess.run([sys.executable, script, "--drive", base, "--requests", str(requests),
                           "--concurrency", str(concurrency), *extra], capture_output=True, text=True, check=True)
    return json.loads(load.stdout)
