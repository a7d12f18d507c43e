"""What a warm pool worker has imported before its first task: the default checks' modules, not the fine-tuning
checks' PEFT, TRL, datasets and FSDP (~1.4 s of a ~3 s warm-up), which load the first time a lora, sft, fsdp or tp
check runs in that worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
FINETUNE_ONLY = ("peft", "trl", "datasets", "torch.distributed.fsdp", "worker.run.checks.finetune_checks")


def _loaded_after(code: str) -> list[str]:
    script = (f"import json, sys\n{code}\n"
              f"print(json.dumps([m for m in {FINETUNE_ONLY!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_warm_worker_has_not_imported_the_fine_tuning_checks() -> None:
    assert _loaded_after("from worker.run.runner.runner import warm_worker; warm_worker(1, 'neuron')") == []


def test_a_fine_tuning_check_imports_them_when_it_runs() -> None:
    # The check table names them by module: asking for the lora check's work resolves it (and so imports PEFT).
    loaded = _loaded_after("from worker.run.checks.checks import FINETUNE_CHECKS\n"
                           "from worker.run.process.by_name import resolve\n"
                           "resolve(f'{FINETUNE_CHECKS}:check_lora')")
    assert "peft" in loaded and "worker.run.checks.finetune_checks" in loaded
