"""API latency benchmark: uvicorn serves the app in one process, a second process drives bounded concurrent load.

Prints p50/p99 for coverage, architectures list and diff over a generated 125k-result SQLite DB. Usage:
    .venv/bin/python bench/bench_api.py [--db var/bench.db] [--requests 400] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_MS = {"coverage": 50.0, "architectures": 50.0, "architectures_filtered": 50.0, "diff": 200.0,
              "diff_random_pairs": 200.0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def drive(base: str, requests: int, concurrency: int) -> dict[str, dict[str, float]]:
    """Runs in the load process: per endpoint, ``requests`` GETs with ``concurrency`` in flight."""
    import httpx

    endpoints = {
        "coverage": "/api/v1/coverage?device=neuron",
        "architectures": "/api/v1/architectures?device=neuron&per_page=50",
        "architectures_filtered": "/api/v1/architectures?device=neuron&status=unsupported&check=forward&q=arch1",
        "diff": "/api/v1/diff?a=run0098&b=run0099",
        # Random pairs over 100 runs overflow the 64-entry roll-up cache: mostly cold reads.
        "diff_random_pairs": None,
    }
    rng = random.Random(0)
    out = {}
    with httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:
        for name, path in endpoints.items():
            def url(path: str | None = path) -> str:
                if path is not None:
                    return path
                a, b = rng.sample(range(100), 2)
                return f"/api/v1/diff?a=run{a:04d}&b=run{b:04d}"

            for _ in range(10):  # warm connections (and, for fixed URLs, the cache)
                client.get(url()).raise_for_status()

            def one(_: int, path: str | None = path) -> float:
                target = url(path)
                t = time.perf_counter()
                r = client.get(target)
                r.raise_for_status()
                return (time.perf_counter() - t) * 1000

            with ThreadPoolExecutor(concurrency) as pool:
                lat = list(pool.map(one, range(requests)))
            out[name] = {"p50_ms": round(_pct(lat, 0.5), 1), "p99_ms": round(_pct(lat, 0.99), 1),
                         "n": len(lat)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=ROOT / "var" / "bench.db")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--drive", help=argparse.SUPPRESS)  # internal: run as the load process against this URL
    args = ap.parse_args()
    if args.drive:
        print(json.dumps(drive(args.drive, args.requests, args.concurrency)))
        return 0
    if not args.db.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_db.py"), str(args.db)], check=True, cwd=ROOT)
    port = _free_port()
    env = {**os.environ, "COMPAT_DATABASE_URL": f"sqlite:///{args.db.resolve()}"}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "cli.serve:create_app", "--factory", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("server did not start")
            time.sleep(0.2)
        load = subprocess.run([sys.executable, __file__, "--drive", base, "--requests", str(args.requests),
                               "--concurrency", str(args.concurrency)], capture_output=True, text=True, check=True)
        results = json.loads(load.stdout)
    finally:
        server.terminate()
        server.wait(timeout=30)
    ok = True
    print(f"{'endpoint':<24}{'p50 ms':>10}{'p99 ms':>10}{'target p99':>12}  (n={args.requests}, "
          f"concurrency={args.concurrency}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for name, r in results.items():
        met = r["p99_ms"] <= TARGETS_MS[name]
        ok &= met
        print(f"{name:<24}{r['p50_ms']:>10}{r['p99_ms']:>10}{TARGETS_MS[name]:>12}  {'ok' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
