"""The diff of two stored runs, read as the gate reads it (``compat.diff.diff_results``): regressions, flaky ones
(b's flake-guard re-run), fixes, what moved and the new failures' signatures; by architecture for the API and the
run diff page. Re-exported by ``service.queries`` (every read is reachable there).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from compat.diff import RunDiff, diff_results
from service import schemas as S
from service.rollup import run_view
from service.runs import DIFF_FIELDS, get_run_row, rerun_of, run_records, selection_of


def run_diff(session: Session, a: str, b: str) -> RunDiff:
    """``compat.diff.diff_results`` of two stored runs, as the gate computes it: b's flake-guard re-run (when one
    was made) decides which regressions are flaky, the two runs' determinants what moved, b's errors the new
    failures' signatures; a selection run b is compared over its own selection."""
    ra, rb = get_run_row(session, a), get_run_row(session, b)
    again = rerun_of(session, b)
    return diff_results(run_records(session, a), run_records(session, b, DIFF_FIELDS), baseline_run=a,
                        current_run=b, only=selection_of(session, b),
                        rerun=run_records(session, again) if again else None, rerun_run=again,
                        determinants=(ra.determinants, rb.determinants))


def diff_runs(session: Session, a: str, b: str) -> S.ArchitectureDiff:
    """Run a to run b by architecture, by the gate's rule (``run_diff``); a selection run b is compared over its own
    selection. An architecture whose every regressed check passed on its re-run is not a regression."""
    ra, rb = get_run_row(session, a), get_run_row(session, b)
    va, vb = run_view(session, ra), run_view(session, rb)
    only = selection_of(session, b)
    keep = set(only) if only is not None else None
    oa = {n: o for n, o in va.outcomes.items() if keep is None or n in keep}
    ob = {n: o for n, o in vb.outcomes.items() if keep is None or n in keep}
    diff = run_diff(session, a, b)
    regressed, fixed = set(diff.regressed_architectures), set(diff.fixed_architectures)
    by_arch: dict[str, set[str]] = {}
    for c in (*diff.regressions, *diff.fixes):
        by_arch.setdefault(c.architecture, set()).add(c.check)
    ranks = {c.architecture: c.rank for c in va.catalog} | {c.architecture: c.rank for c in vb.catalog}
    rows = diff.as_dict()
    out = S.ArchitectureDiff(a=a, b=b, regressions=[], fixes=[], new=[], removed=[], changed=[],
                             regressed_checks=len(diff.regressions), fixed_checks=len(diff.fixes),
                             missing_checks=len(diff.missing), moved=rows["moved"], regressed=rows["regressions"],
                             flaky=rows["flaky"], flaky_checks=len(diff.flaky), signatures=rows["signatures"],
                             rerun=diff.rerun_run)
    for name in sorted(set(oa) | set(ob), key=lambda n: (ranks.get(n, 10**9), n)):
        x, y = oa.get(name), ob.get(name)
        before, after = (x.statuses if x else {}), (y.statuses if y else {})
        changed = sorted(c for c in set(before) | set(after) if before.get(c) != after.get(c))
        entry = S.DiffEntry(architecture=name, rank=ranks.get(name), before=before, after=after,
                            changed_checks=changed)
        if name in regressed:
            out.regressions.append(entry)
        elif name in fixed:
            out.fixes.append(entry)
        elif x is None:
            out.new.append(entry)
        elif y is None:
            out.removed.append(entry)
        elif changed:
            out.changed.append(entry)
    return out
