"""Wall time of ``python -c "import torch"`` with the device's autoload off and on, alternating in fresh interpreters.

Usage: ``python bench/bench_autoload.py EP_DIR N`` where EP_DIR holds a dist-info carrying the ``torch.backends``
entry point (the venv's own install, once re-installed, carries it too: then EP_DIR may be any empty folder).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def main(ep: str, n: int) -> None:
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), ep) if p)}
    res: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(n):
        for mode in ("off", "on"):
            env = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0" if mode == "off" else "1")
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", "import sys, torch; print('neuron_backend' in sys.modules)"],
                                 env=env, capture_output=True, text=True, check=True).stdout.strip()
            res[mode].append(time.perf_counter() - t)
            if out != ("True" if mode == "on" else "False"):
                raise SystemExit(f"autoload {mode}: neuron_backend imported = {out}")
    for mode, v in res.items():
        print(f"{mode} median {statistics.median(v):.2f} s  min {min(v):.2f} s  max {max(v):.2f} s  (n={len(v)})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
