"""Full-registry tiny-model build benchmark: build + reload + CPU forward x2 + 8-token greedy generate + backward.

Run: .venv/bin/python bench/bench_build.py [--arch NAME ...] [--json FILE]; prints per-arch status/timings and
totals. Everything runs in this one process (the sweep's pool runs the same work in long-lived workers).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.build.build import build_checkpoint  # noqa: E402
from worker.catalog.load import load_catalog  # noqa: E402

SEQ = 12


def run_one(entry, workdir: Path) -> dict:
    """Build one architecture and exercise it on CPU; returns status, stage of failure and per-stage seconds."""
    times: dict[str, float] = {}
    stage = "build"
    try:
        t = time.perf_counter()
        built = build_checkpoint(entry, workdir / entry.name, seed=0)
        times["build"] = time.perf_counter() - t
        stage = "load"
        t = time.perf_counter()
        import transformers

        model = getattr(transformers, built.model_class).from_pretrained(built.path, device_map="cpu")
        model.eval()
        times["load"] = time.perf_counter() - t
        stage = "forward"
        vocab = built.config.get_text_config().vocab_size
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(3, min(vocab, 1000), (1, SEQ), generator=gen)
        t = time.perf_counter()
        with torch.no_grad():
            a = model(input_ids=ids).logits
            b = model(input_ids=ids).logits
        times["forward"] = (time.perf_counter() - t) / 2
        if not torch.equal(a, b):
            return {"status": "nondeterministic", "stage": stage, "times": times, "n_params": built.n_params}
        # A second load must give the same logits: a weight missing from the checkpoint would be randomly
        # re-initialised on every load and the device run would never match the reference.
        again = getattr(transformers, built.model_class).from_pretrained(built.path, device_map="cpu").eval()
        with torch.no_grad():
            c = again(input_ids=ids).logits
        if not torch.equal(a, c):
            return {"status": "reload_differs", "stage": "load", "times": times, "n_params": built.n_params,
                    "error": f"max abs diff {(a - c).abs().max().item():.3g} between two loads"}
        if not torch.isfinite(a).all():
            return {"status": "nonfinite", "stage": stage, "times": times, "n_params": built.n_params}
        stage = "generate"
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=8, do_sample=False, min_new_tokens=8)
        times["generate"] = time.perf_counter() - t
        stage = "backward"
        model.train()
        t = time.perf_counter()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        times["backward"] = time.perf_counter() - t
        return {"status": "pass", "stage": None, "times": times, "n_params": built.n_params}
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, the bench goes on
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        return {"status": "fail", "stage": stage, "times": times,
                "error": f"{type(exc).__name__}: {str(exc)[:300]} @ {where}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", nargs="*", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    catalog = load_catalog("registry")
    entries = [e for e in catalog.entries if not args.arch or e.name in args.arch or e.model_type in args.arch]
    results = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, entry in enumerate(entries, 1):
            t = time.perf_counter()
            r = run_one(entry, Path(tmp))
            r["total_s"] = time.perf_counter() - t
            results[entry.name] = {"model_type": entry.model_type, **r}
            msg = r.get("error", "")
            print(f"[{i}/{len(entries)}] {entry.name:45s} {r['status']:8s} {r['total_s']:5.2f}s "
                  f"{r.get('n_params', '')} {r['stage'] or ''} {msg}", flush=True)
    wall = time.perf_counter() - start
    n_pass = sum(r["status"] == "pass" for r in results.values())
    print(f"\n{n_pass}/{len(results)} pass ({100 * n_pass / max(1, len(results)):.1f}%) in {wall:.1f}s "
          f"({wall / max(1, len(results)):.2f}s per architecture)")
    for stage in ("build", "load", "forward", "generate", "backward"):
        vals = [r["times"][stage] for r in results.values() if stage in r["times"]]
        if vals:
            print(f"  {stage:9s} total {sum(vals):6.1f}s  mean {sum(vals) / len(vals):.3f}s  max {max(vals):.2f}s")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
