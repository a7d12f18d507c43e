"""``compat repro``: a standalone script reproducing one architecture (or a submission's config) on a device.

The sweep's tiny config and seed, shrunk exactly as the run shrank it; run through ``cli.commands`` (torch loads).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cli.console import console, fail
from cli.validate import architecture_error
from compat.results import ArchitectureEntry, Check
from compat.settings import get_settings
from service.store import Store
from worker.build.tiny_config import TinyConfigError, shrink
from worker.catalog.load import load_catalog
from worker.orchestration.submissions import submission_entry
from worker.run.process.device_names import device_type
from worker.run.repro.repro_finetune import ReproMixError, finetune_repro


def _submitted_entry(submission_id: int) -> ArchitectureEntry:
    """The entry submission ``submission_id``'s run built, from the config kept on its row (never the Hub)."""
    url = get_settings().database_url
    sub = Store(url).submission(submission_id)
    if sub is None:
        raise fail(f"no submission {submission_id} in the store {url} (COMPAT_DATABASE_URL)")
    if sub["config"] is None:
        raise fail(f"submission {submission_id} ({sub['model_id']}) has no stored config: its Hub config is kept "
                   "when its run starts (state: " + str(sub["state"]) + ")", 1)
    try:
        entry = submission_entry(sub)
    except ValueError as exc:
        raise fail(f"submission {submission_id}: {exc}", 1) from None
    if entry.remote_code:
        raise fail(f"submission {submission_id} ({entry.name}) needs remote code: nothing to reproduce", 1)
    return entry


def repro(*, architecture: str | None, device: str, checks: list[Check], out: Path | None,
          submission: int | None = None) -> None:
    """``compat repro``: a standalone script reproducing ARCH on DEVICE with the sweep's tiny config and seed; with
    ``submission``, that submission's config shrunk exactly as its run shrank it."""
    settings = get_settings()
    kind = device_type(device)  # spelling checked by the CLI; no availability check: repro may target another machine
    if submission is not None:
        entry = _submitted_entry(submission)
    else:
        entries = {e.name: e for e in load_catalog(settings.catalog_source).entries}
        bad = architecture_error([architecture], list(entries))
        if bad:
            raise fail(bad)
        entry = entries[architecture]
    architecture = entry.name
    try:
        config = shrink(entry).to_dict()
    except TinyConfigError as exc:
        raise fail(f"cannot build a tiny {architecture}: {exc}", 1) from None
    backend = "neuron" if kind == "neuron" else "inductor"
    try:  # fsdp/tp: a torchrun script; lora/sft: the single-process script with their blocks
        script = finetune_repro(architecture, device, config, seed=settings.seed, checks=checks,
                                compile_backend=backend)
    except ReproMixError as exc:
        raise fail(str(exc)) from None
    if out:
        out.write_text(script)
        console.print(f"wrote {out}")
    else:
        sys.stdout.write(script)
