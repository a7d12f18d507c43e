"""The CLI's terminal tables (rich) over result records: the coverage table, one architecture's checks, blockers.

Presentation only: the numbers come from the pure rules of ``compat.results`` (coverage, blockers). Each table is
readable at 80 columns: op names, statuses and checks are never cut or folded; free text wraps, and a table too wide
for the terminal switches to a narrower layout (``Fit``) rather than truncating.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Protocol

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from compat import forward_error
from compat.coverage import FallbackOp, coverage
from compat.ops import op_dtypes, op_name
from compat.results import ALL_CHECKS, CHECK_ORDER, Check, ResultRecord, Status, check_headline, percent
from compat.text_cut import shorten
from compat.wording import plural

SHORTENED = " […]"  # the mark of a shortened error; a note under the table says how to see it whole
SHOWN_ARCHITECTURES = 4  # a blocker's architectures named in the table (the rest counted)


class Fit:
    """The first layout that shows every ``whole`` string unbroken on one line and no line wider than the
    terminal; the last layout (the narrowest) otherwise. ``caption`` (the coverage table's summary) and ``notes``
    (``compat show``'s known issues) follow it at the console's whole width, not the table's: a narrow table must
    not squeeze the text under it into a narrow column."""

    def __init__(self, layouts: Sequence[RenderableType], whole: Iterable[str], caption: str | None = None,
                 notes: Sequence[str] = ()) -> None:
        self.layouts = list(layouts)
        self.whole = sorted(set(whole))
        self.caption = caption
        self.notes = list(notes)

    def fits(self, layout: RenderableType, width: int) -> bool:
        probe = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
        probe.print(layout, crop=False)  # a line wider than the terminal must show, not be cut to fit
        lines = probe.file.getvalue().splitlines()
        return (all(Text(line).cell_len <= width for line in lines)
                and all(any(w in line for line in lines) for w in self.whole))

    def choose(self, width: int) -> RenderableType:
        return next((t for t in self.layouts[:-1] if self.fits(t, width)), self.layouts[-1])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.choose(options.max_width)
        for text in ([self.caption] if self.caption else []) + self.notes:
            yield Text(text)  # Text, not markup: "[1]" and "[fallback: ...]" are printed as written


def coverage_table(records: Iterable[ResultRecord], title: str = "coverage", *,
                   catalog: Iterable[str] | None = None, scope: str = "") -> Fit:
    """Status counts per check plus the architecture-level summary (and the LoRA headline) as the caption, over
    ``catalog`` (the run's planned architectures, the API's denominator) and what it is a share of (``scope``):
    one row per status and one column per check where the terminal is wide enough, else one row per check with
    its counts (nine checks do not fit 80 columns as columns). Neither layout cuts a status."""
    records = list(records)
    cov = coverage(records, catalog)
    checks = [c for c in ALL_CHECKS if str(c) in cov.per_check]
    statuses = [s for s in Status if any(cov.per_check[str(c)][str(s)] for c in checks)]
    v = cov.verdicts
    caption = (f"{plural(cov.architectures, 'architecture')}: {v['supported']} supported natively, "
               f"{v['supported_with_fallback']} with CPU fallback, {v['failing']} failing, "
               f"{v['reference_fail']} reference_fail, {v['skipped']} skipped, "
               f"{v['not_judged']} not judged (support checks not run or no verdict) "
               f"({percent(cov.supported, cov.architectures)} supported; "
               f"{cov.all_checks_pass(records)} pass every check)")
    if (lora := check_headline(records, Check.LORA)) is not None:  # its own headline, outside "supported"
        caption += f"; {lora.text()}"
    if scope:
        caption += f"\nscope: {scope}"
    wide = Table(title=title)
    wide.add_column("status", no_wrap=True)
    for c in checks:
        wide.add_column(str(c), justify="right", no_wrap=True)
    for s in statuses:
        wide.add_row(str(s), *[str(cov.per_check[str(c)][str(s)] or "") for c in checks])
    narrow = Table(title=title, box=box.SIMPLE_HEAD)
    narrow.add_column("check", no_wrap=True)
    narrow.add_column("architectures per status", ratio=1, overflow="fold")
    for c in checks:
        counts = cov.per_check[str(c)]
        narrow.add_row(str(c), Text(", ".join(f"{s} {counts[str(s)]}" for s in statuses if counts[str(s)])))
    return Fit([wide, narrow], [str(s) for s in statuses] + [str(c) for c in checks], caption)


def _detail(r: ResultRecord, known: list[str], seen: dict[str, str], label: str, full: bool) -> tuple[Text, bool]:
    """The detail cell and whether its error was shortened; a known issue is referred to by its number in
    ``known`` (its text is printed once, under the table), a message shown in an earlier row (``seen``: message ->
    that row's ``label``) by that row."""
    detail, cut = r.reason or (r.error.message if r.error and r.error.message else ""), False
    if not full:
        detail, cut = shorten(detail)
    if r.status == Status.PASS and (errors := forward_error.error_text(r)):
        detail, cut = errors, False
    elif r.status == Status.MISMATCH and (fp32 := forward_error.fp32_figures(r)):
        detail += f"; fp32 {fp32}"
    if detail and detail in seen:
        detail = f"same as {seen[detail]}"
    elif detail:
        seen[detail] = label
    if cut:
        detail += SHORTENED
    if r.fallback_ops:
        detail += f" [fallback: {', '.join(r.fallback_ops[:5])}]"
    if r.known_issue:
        detail += f" [known issue {known.index(r.known_issue) + 1}]"
    # Text, not a str: "[fallback: ...]" would otherwise be parsed as rich markup and silently vanish.
    return Text(detail.strip()), cut


def results_table(records: list[ResultRecord], title: str, *, full: bool = False,
                  whole_hint: str = "the JSON report") -> Fit:
    """One architecture's checks (``compat show``): one row per check where the terminal is wide enough, else
    one block per check (status and time, then the blocking op, then the detail, each on its own line). Under it,
    each known issue's text once (the rows refer to it by number) and, when an error was shortened (``full``
    off), where to see it whole (``whole_hint``)."""
    records = sorted(records, key=lambda r: (r.device, CHECK_ORDER.get(r.check, 99)))
    known = list(dict.fromkeys(r.known_issue for r in records if r.known_issue))
    devices = sorted({r.device for r in records})
    seen: dict[str, str] = {}
    details = {id(r): _detail(r, known, seen, f"{r.check}" + (f" on {r.device}" if len(devices) > 1 else ""), full)
               for r in records}
    notes = [f"known issue {i}: {text}" for i, text in enumerate(known, 1)]
    if (why := forward_error.why_note(records)) is not None:
        notes.append(why)
    if any(cut for _text, cut in details.values()):
        notes.append(f"{SHORTENED.strip()} an error cut at a sentence end; all of it:\n    {whole_hint}")
    if len(devices) == 1:
        title = f"{title} on {devices[0]}"

    wide = Table(title=title)
    if len(devices) > 1:
        wide.add_column("device", no_wrap=True)
    for col in ("check", "status"):
        wide.add_column(col, no_wrap=True)
    wide.add_column("detail", ratio=1, min_width=24, overflow="fold")
    wide.add_column("blocking op", no_wrap=True)
    wide.add_column("seconds", no_wrap=True, justify="right")
    for r in records:
        cells = [str(r.check), str(r.status), details[id(r)][0], Text(r.blocking_op or ""), f"{r.duration_s:.2f}"]
        wide.add_row(*([r.device] if len(devices) > 1 else []), *cells)

    narrow = Table(title=title, box=box.SIMPLE_HEAD, show_lines=True)
    narrow.add_column("check", no_wrap=True)
    narrow.add_column("status, seconds / blocking op / detail", ratio=1, overflow="fold")
    for r in records:
        head = f"{r.status}  {r.duration_s:.2f}s" + (f"  on {r.device}" if len(devices) > 1 else "")
        cell = Text(head, style="bold")
        if r.blocking_op:
            cell.append("\nop: ").append(r.blocking_op)
        detail = details[id(r)][0]
        if detail:
            cell.append("\n").append_text(detail)
        narrow.add_row(str(r.check), cell)

    whole = ({str(r.status) for r in records} | {str(r.check) for r in records}
             | {op_name(r.blocking_op) for r in records if r.blocking_op})
    return Fit([wide, narrow], whole, notes=notes)


class BlockerRow(Protocol):
    """An op's row as ``compat blockers`` prints it (``service.schemas_blockers.Blocker``, from ``compat.chains``)."""

    op: str
    architectures: list[str]
    unlocks: list[str] | None
    variants: list[str]
    checks: list[str]


def blockers_table(ranked: Sequence[BlockerRow], top: int | None = None) -> Fit:
    """Ops ranked by the architectures whose blocker chain holds each one (``compat blockers``): one row per op with
    what implementing it alone unlocks ("?" where only first blockers are known), its dtypes, checks and
    architectures in their own columns where the terminal is wide enough, else under the op."""
    shown = ranked[:top] if top else ranked
    rows = []
    for i, b in enumerate(shown, 1):
        dtypes = ", ".join(op_dtypes(v) for v in b.variants if op_dtypes(v))
        archs = ", ".join(b.architectures[:SHOWN_ARCHITECTURES])
        if len(b.architectures) > SHOWN_ARCHITECTURES:
            archs += f" (+{len(b.architectures) - SHOWN_ARCHITECTURES} more)"
        unlocks = "?" if b.unlocks is None else str(len(b.unlocks))
        rows.append((str(i), b.op, str(len(b.architectures)), unlocks, dtypes, ", ".join(b.checks), archs))

    wide = Table(title="blocking ops")
    for col in ("#", "op", "blocks", "unlocks"):
        wide.add_column(col, no_wrap=True, justify="left" if col == "op" else "right")
    for col, least in (("dtypes", 10), ("checks", 10), ("architectures", 24)):
        wide.add_column(col, ratio=1, min_width=least, overflow="fold")
    for row in rows:
        wide.add_row(*row[:4], *(Text(c) for c in row[4:]))

    narrow = Table(title="blocking ops", box=box.SIMPLE_HEAD, show_lines=True)
    narrow.add_column("#", no_wrap=True, justify="right")
    narrow.add_column("op / dtypes / checks / architectures", ratio=1, overflow="fold")
    narrow.add_column("blocks", no_wrap=True, justify="right")
    narrow.add_column("unlocks", no_wrap=True, justify="right")
    for i, op, blocks, unlocks, dtypes, checks, archs in rows:
        cell = Text(op, style="bold")
        for label, value in (("dtypes", dtypes), ("checks", checks), ("in", archs)):
            if value:
                cell.append(f"\n{label}: {value}")
        narrow.add_row(i, cell, blocks, unlocks)

    names = {a for b in shown for a in b.architectures[:SHOWN_ARCHITECTURES]}
    return Fit([wide, narrow], {b.op for b in shown} | names)


class ChainRow(Protocol):
    architecture: str
    text: str


def chains_table(chains: Sequence[ChainRow], top: int | None = None) -> Fit:
    """Each blocked architecture's chain (``compat blockers``): its ops in the order the device meets them and how
    it ends; the chain text wraps at its arrows, the architecture's name never breaks."""
    shown = chains[:top] if top else chains
    wide = Table(title="blocker chains")
    wide.add_column("architecture", no_wrap=True)
    wide.add_column("chain", ratio=1, min_width=24, overflow="fold")
    narrow = Table(title="blocker chains", box=box.SIMPLE_HEAD, show_lines=True)
    narrow.add_column("architecture / chain", ratio=1, overflow="fold")
    for c in shown:
        wide.add_row(c.architecture, Text(c.text))
        narrow.add_row(Text(c.architecture, style="bold").append(f"\n{c.text}"))
    return Fit([wide, narrow], {c.architecture for c in shown})


def fallback_table(ranked: list[FallbackOp], top: int | None = None) -> Fit:
    """Ops supported architectures run on the CPU fallback (``compat blockers``): how many architectures each one
    takes off the CPU when implemented natively, and how many use it."""
    shown = ranked[:top] if top else ranked
    wide = Table(title="ops on the CPU fallback")
    for col in ("#", "op", "off the CPU", "falls back in"):
        wide.add_column(col, no_wrap=True, justify="left" if col == "op" else "right")
    wide.add_column("architectures", ratio=1, min_width=24, overflow="fold")
    narrow = Table(title="ops on the CPU fallback", box=box.SIMPLE_HEAD, show_lines=True)
    narrow.add_column("#", no_wrap=True, justify="right")
    narrow.add_column("op / architectures", ratio=1, overflow="fold")
    narrow.add_column("off the CPU", no_wrap=True, justify="right")
    for i, f in enumerate(shown, 1):
        archs = ", ".join(f.architectures[:SHOWN_ARCHITECTURES])
        if len(f.architectures) > SHOWN_ARCHITECTURES:
            archs += f" (+{len(f.architectures) - SHOWN_ARCHITECTURES} more)"
        wide.add_row(str(i), f.op, str(len(f.offloads)), str(len(f.architectures)), Text(archs))
        narrow.add_row(str(i), Text(f.op, style="bold").append(f"\nin: {archs}"), str(len(f.offloads)))
    return Fit([wide, narrow], {f.op for f in shown})
