"""``compat whatif``: a stored run re-judged under other options of the device's decision switches, from what the run
measured (compat.decisions.whatif); a combination it did not measure is named, with the command that measures it.
"""

from __future__ import annotations

from pathlib import Path

from cli.console import console, fail
from compat.coverage import coverage
from compat.decisions import DecisionEffect, headline_range, whatif
from compat.results import Report, ResultRecord
from service.runs import NotFound, get_run_row, latest_run, run_records
from service.store import Store


def _from_report(path: Path) -> tuple[str, list[ResultRecord], list[str], list[DecisionEffect]]:
    try:
        report = Report.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read report {path}: {exc}") from None
    return (report.run.id, report.results, [e.name for e in report.architectures],
            [DecisionEffect(**d) for d in report.decisions])


def _from_store(device: str, run_id: str | None) -> tuple[str, list[ResultRecord], list[str], list[DecisionEffect]]:
    with Store().session() as s:
        try:
            run = get_run_row(s, run_id) if run_id else latest_run(s, device)
        except NotFound as exc:
            raise fail(str(exc)) from None
        if run is None:
            raise fail(f"no finished full run on {device!r} yet; run `compat sweep` first", 1)
        records = run_records(s, run.id)
        effects = [DecisionEffect(**d) for d in (run.decisions or [])]
        return run.id, records, sorted({r.architecture for r in records}), effects


def run(*, chosen: dict[str, str], device: str, run_id: str | None, json_path: Path | None) -> int:
    """Print the run's headline with its range, then the re-judged figure under ``chosen`` (exit 2: not measured)."""
    rid, records, catalog, effects = _from_report(json_path) if json_path else _from_store(device, run_id)
    cov = coverage(records, catalog)
    console.print(f"run {rid}: {headline_range(cov.supported, cov.architectures, effects).text()}", highlight=False,
                  soft_wrap=True)
    for e in effects:
        console.print(f"  {e.key}: {e.moves:+d} supported, {e.native_moves:+d} native ({e.confidence}; "
                      f"{e.measured_by}; {len(e.affected)} affected) - {'; '.join(e.sources)}", highlight=False,
                      soft_wrap=True)
    if not chosen:
        return 0
    found, text = whatif(chosen, cov.supported, cov.architectures, effects)
    console.print(text, highlight=False, soft_wrap=True)
    return 0 if found is not None else 2
