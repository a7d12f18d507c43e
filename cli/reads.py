"""The read commands over stored results or a JSON report: ``compat show``, ``compat blockers``, ``compat runs list``.

No torch: they load the store (SQLAlchemy) and rich only, and never create a store that is not there yet.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cli import stored, validate
from cli.console import console, fail
from cli.stored import missing_store
from cli.tables import blockers_table, chains_table, fallback_table, results_table
from compat.chains import Chain, blocker_report
from compat.coverage import FallbackOp, fallback_ranking
from compat.results import Report, ResultRecord, Status
from compat.settings import get_settings
from compat.verdict_text import verdict_text
from service import queries
from service import schemas_blockers as SB
from service.blockers import to_schema
from service.commands import runs_list as runs_page
from service.store import Store
from worker.catalog.names import registry_names


def _read_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read report {path}: {exc}") from None


def _store_or_fail(what: str) -> Store:
    """The store at COMPAT_DATABASE_URL; a read never creates one: none there yet is "no results", naming where."""
    url = get_settings().database_url
    if missing_store(url):
        raise fail(f"no results{what} in {url} (no store there yet); run `compat sweep` first", 1)
    return Store(url)


def _load_results(json_path: Path | None, device: str | None, architecture: str) -> list[ResultRecord]:
    if json_path is not None:
        recs = _read_report(json_path).results
        return [r for r in recs if r.architecture == architecture and (device is None or r.device == device)]
    return _store_or_fail(_for(architecture, device)).latest_results(architecture, device)


def _for(architecture: str, device: str | None) -> str:
    return f" for {architecture}" + (f" on {device}" if device else "")


def check_architecture(name: str) -> None:
    """``compat show NAME``: a name in the catalog or the registry is fine; another must have stored results (a Hub
    listing or a submission may have stored it), else exit 2 with the closest names."""
    registry = registry_names()
    if registry is None:  # Transformers' source unreadable: the store's answer below decides
        return
    known = set(validate.known_architectures(get_settings().catalog_source) or ()) | set(registry)
    if name in known or stored.architecture_known(name):
        return
    raise fail(validate.unknown_architecture(name, sorted(known | set(stored.architectures()))))


def show(*, architecture: str, device: str | None, json_path: Path | None, log: bool, full: bool = False) -> None:
    """``compat show``: the latest results of one architecture, each known issue once, its reproducers and
    (``--log``) its output; an error longer than the table's bound is cut at a sentence end unless ``full``."""
    if json_path is None:
        check_architecture(architecture)
    recs = _load_results(json_path, device, architecture)
    if not recs:
        bad = validate.architecture_error([architecture], registry_names() or [architecture])
        if bad:
            raise fail(bad)
        where = json_path or get_settings().database_url
        raise fail(f"no results{_for(architecture, device)} in {where}; run `compat sweep` first", 1)
    console.print(f"{architecture}: {verdict_text(recs)}", highlight=False)  # wrapped at words: fits 80 columns
    console.print(results_table(recs, title=architecture, full=full,
                                whole_hint=f"compat show {architecture} --full"))
    for r in recs:
        if r.repro and r.status != Status.PASS:  # a command to copy: never wrapped
            console.print(f"repro ({r.check}): {r.repro}", highlight=False, soft_wrap=True)
    if log:
        # Each record carries the output printed since the one before it: together, the architecture's log.
        for r in recs:
            if r.log:
                console.print(r.log, markup=False, highlight=False, end="" if r.log.endswith("\n") else "\n")


def _stored_blockers(device: str | None, run_id: str | None) -> SB.Blockers | None:
    """The API's ``/blockers`` of ``device`` (its headline run) or of one run; None when nothing is stored."""
    with _store_or_fail(f" on {device}" if device else "").session() as s:
        try:
            return queries.blockers(s, device=device, run_id=run_id)
        except queries.NotFound as exc:
            if run_id is None and "no finished full run" in str(exc):
                # A --arch/--limit sweep is a selection, never the headline: name the way to read it.
                raise fail(f"{exc} (a --arch or --limit sweep is a selection, never the headline): "
                           "read one run with `compat blockers --run ID` (ids: `compat runs list`)", 1) from None
            return None


def _report_blockers(path: Path, device: str | None) -> SB.Blockers | None:
    """The same read over a JSON report: its records and its measured chains (``compat.chains``)."""
    report = _read_report(path)
    recs = [r for r in report.results if device is None or r.device == device]
    if not recs:
        return None
    fallback = [SB.FallbackOp(op=f.op, count=len(f.architectures), architectures=f.architectures,
                             offloads=f.offloads) for f in fallback_ranking(recs)]
    ranks = {r.architecture: r.rank for r in recs if r.rank is not None}
    return to_schema(blocker_report(recs, [Chain(**c) for c in report.chains]), fallback, ranks, device, report.run.id)


def blockers(*, device: str | None, json_path: Path | None, top: int, run_id: str | None = None) -> None:
    """``compat blockers``: what implementing ops unlocks (``compat.chains``: sets of ops, each architecture's
    chain), the ops ranked by the architectures whose chain holds them, then the ops supported architectures still
    run on the CPU fallback (``fallback_ranking``); over a JSON report, or the headline run of the device in the
    store, as the API and the pages read it."""
    if json_path is not None:
        found = _report_blockers(json_path, device)
    elif run_id is not None:
        found = _stored_blockers(device, run_id)
    else:
        device = device or get_settings().device
        found = _stored_blockers(device, None)
    if found is None:
        where = json_path or get_settings().database_url
        raise fail(f"no results{f' on {device}' if device else ''} in {where}; run `compat sweep` first", 1)
    if not found.items:
        console.print("no blocking ops: nothing failed on an identifiable op")
    else:
        console.print(blockers_table(found.items, top))
        for u in found.unlock_sets[:5]:  # the table and the chains list the rest
            console.print(u.message, highlight=False)
        if not found.measured:
            for b in found.items[:3]:
                console.print(b.message, highlight=False)
        console.print(chains_table(found.chains, top))
        console.print(found.note, highlight=False)
    if found.fallback:
        console.print(fallback_table(found.fallback, top))
        # Only ops that alone take an architecture off the CPU earn a sentence; the table lists the rest.
        for f in [f for f in found.fallback if f.offloads][:3]:
            console.print(FallbackOp(f.op, f.architectures, f.offloads).message, highlight=False)


def runs_list(*, device: str | None, limit: int, kind: str) -> None:
    """``compat runs list``: the newest runs of ``kind`` (sweep, submission or all), with how many of the other kind
    it leaves out; read as ``GET /api/v1/runs`` reads them. No store yet: says where it looked, creates nothing."""
    url = get_settings().database_url
    label = "" if kind == "all" else f"{kind} "
    if missing_store(url):
        console.print(f"no {label}runs in {url} (no store there yet); run `compat sweep` first", highlight=False,
                      soft_wrap=True)
        return
    try:
        page = runs_page(url, device=device, limit=limit, kind=None if kind == "all" else kind)
    except LookupError as exc:  # an unknown device: the store names the ones it has
        raise fail(str(exc)) from None
    hidden = "".join(f"; {n} {k} run(s) not listed: --kind {k}" for k, n in page.kinds.items()
                     if n and kind != "all" and k != kind)
    if not page.items:
        console.print(f"no {label}runs in {url}{hidden}; run `compat sweep` first", highlight=False, soft_wrap=True)
        return
    now = datetime.now(UTC)
    for r in page.items:
        age = int((now - r.started).total_seconds() // 60)
        what = f"#{r.submission_id}" if r.kind == "submission" and r.submission_id else r.scope
        rerun = f"  re-run of {r.rerun_of}" if r.rerun_of else (f"  re-run {r.rerun}" if r.rerun else "")
        console.print(f"{r.id}  {r.device:<14} {r.trigger:<10} {r.state:<11} {what:<9} "
                      f"{r.supported}/{r.total} supported  {r.results}/{r.planned} results  "
                      f"{f'{age // 60} h {age % 60} min' if age >= 60 else f'{age} min'} ago{rerun}", highlight=False,
                      soft_wrap=True)
    console.print(f"{len(page.items)} of {page.total} {label}run(s){hidden}; resume an interrupted one: "
                  "compat sweep --resume ID", highlight=False, soft_wrap=True)
