"""Server time of the dashboard's overview and matrix pages on a large results store (target: p50 <= 150 ms).

Run: .venv/bin/python bench/bench_pages.py [--db URL | --generate FILE] [--repeat 30]; prints p50/p95 per page.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FIRST: dict[str, float] = {}  # the very first request of each page in this process (every cache cold)
PAGES = ["/", "/matrix", "/matrix?status=failing&device=neuron", "/matrix?q=arch01&sort=name", "/blockers"]


def measure(url: str, repeat: int, *, page_cache: bool) -> dict[str, list[float]]:
    """Wall time of ``repeat`` requests per page through the in-process ASGI client (no network, so this is
    server time plus a few hundred microseconds of client). ``page_cache=False`` empties the dashboard's page
    cache before every request: the cost of the first view after a run lands."""
    from fastapi.testclient import TestClient

    from compat.settings import Settings
    from dashboards.cache import PAGE_CACHE
    from dashboards.views import mount_pages
    from service.app import create_app

    client = TestClient(create_app(Settings(database_url=url), pages=mount_pages))
    out: dict[str, list[float]] = {}
    for path in PAGES:
        t = time.perf_counter()
        assert client.get(path).status_code == 200, path  # warm: templates compiled, connections pooled
        FIRST.setdefault(path, (time.perf_counter() - t) * 1000)
        times = []
        for _ in range(repeat):
            if not page_cache:
                PAGE_CACHE.clear()
            t = time.perf_counter()
            resp = client.get(path)
            times.append((time.perf_counter() - t) * 1000)
            assert resp.status_code == 200
        out[path] = times
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", help="database URL of an existing store (e.g. from bench/gen_db.py)")
    ap.add_argument("--generate", type=Path, default=Path("var/bench.db"),
                    help="SQLite file of the 125k-result store made by bench/gen_db.py (generated if missing)")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    if args.db:
        url = args.db
    else:
        from bench.gen_db import generate

        path = args.generate
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            t = time.perf_counter()
            generate(path, runs=100, archs=250)
            print(f"generated {path} in {time.perf_counter() - t:.0f} s")
        url = f"sqlite:///{path}"
    from sqlalchemy import func, select

    from service import db
    from service.models import Result

    with db.session_scope(url) as s:
        n = s.scalar(select(func.count()).select_from(Result))
    print(f"store: {url} ({n:,} results); {args.repeat} requests per page")
    for label, cached in (("page cache warm (repeat views)", True), ("page cache empty (first view after a write)", False)):
        print(f"\n{label}\n{'page':44} {'p50 ms':>8} {'p95 ms':>8} {'min ms':>8}")
        for path, times in measure(url, args.repeat, page_cache=cached).items():
            q = statistics.quantiles(times, n=20)
            print(f"{path:44} {statistics.median(times):8.1f} {q[18]:8.1f} {min(times):8.1f}")
    print("\nfirst request of each page in a fresh process (all caches cold; '/' also pays for opening the DB)")
    for path, ms in FIRST.items():
        print(f"{path:44} {ms:8.1f}")


if __name__ == "__main__":
    main()
