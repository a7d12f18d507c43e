"""The architecture matrix as pure data: pivot per-device rows into one row per architecture, then filter,
search, sort and paginate from URL query parameters (so every view of the matrix is a shareable link)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from compat import status_filter
from compat.results import ALL_CHECKS, Status
from dashboards.status_style import is_failure

PER_PAGE = 100
# Status filter values beyond the plain statuses: groups a user actually asks for.
STATUS_GROUPS = status_filter.GROUPS  # the API's vocabulary (compat.status_filter), not a page's own
SORT_KEYS = {"rank": "catalog rank", "name": "name", "type": "model type", "failures": "failing checks"}
# Worst first when sorting a column by status.
_SEVERITY = {s: i for i, s in enumerate([
    Status.CRASH, Status.ERROR, Status.UNSUPPORTED_OP, Status.UNSUPPORTED_DTYPE, Status.OOM, Status.MISMATCH,
    Status.TIMEOUT, Status.REFERENCE_FAIL, Status.SKIPPED, Status.PASS])}


@dataclass
class MatrixRow:
    """One architecture with its status per (device, check) column."""

    name: str
    rank: int
    model_type: str = ""
    representative: str | None = None
    remote_code: bool = False
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    supported: dict[str, bool] = field(default_factory=dict)
    blocking_op: str | None = None
    error: str | None = None
    changed: set[tuple[str, str]] = field(default_factory=set)  # columns whose status changed since last run
    fallback_ops: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # column -> ops run on the CPU

    def failures(self, columns: Iterable[tuple[str, str]]) -> int:
        return sum(1 for c in columns if is_failure(self.cells.get(c)))

    def ran_on_cpu(self, column: tuple[str, str]) -> list[str] | None:
        """A passing cell's ops on the CPU fallback ([] = it ran natively); None for any other status (where
        it ran is not the question)."""
        return list(self.fallback_ops.get(column, [])) if self.cells.get(column) == Status.PASS else None


@dataclass(frozen=True)
class MatrixQuery:
    """The matrix's view state, parsed from and written back to URL query parameters."""

    status: str = ""
    device: str = ""
    check: str = ""
    q: str = ""
    sort: str = "rank"
    order: str = "asc"
    page: int = 1

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> MatrixQuery:
        """Lenient parse: an unknown or malformed value falls back to the default instead of an error page."""
        try:
            page = min(1_000_000, max(1, int(params.get("page", "1") or 1)))  # bounded like every page number
        except ValueError:
            page = 1
        order = params.get("order", "asc")
        return cls(
            status=(params.get("status") or "").strip(),
            device=(params.get("device") or "").strip(),
            check=(params.get("check") or "").strip(),
            q=(params.get("q") or "").strip()[:200],
            sort=(params.get("sort") or "rank").strip(),
            order=order if order in ("asc", "desc") else "asc",
            page=page,
        )

    def url(self, **changes: object) -> str:
        """``/matrix?...`` for this view with ``changes`` applied; default values are left out of the URL."""
        q = replace(self, **changes)  # type: ignore[arg-type]
        defaults = MatrixQuery()
        params = {k: getattr(q, k) for k in ("q", "status", "device", "check", "sort", "order", "page")
                  if getattr(q, k) != getattr(defaults, k)}
        return "/matrix" + (f"?{urlencode(params)}" if params else "")

    def sort_url(self, key: str) -> str:
        """Clicking the active sort column flips its order; another column sorts ascending from page 1."""
        order = ("desc" if self.order == "asc" else "asc") if self.sort == key else "asc"
        return self.url(sort=key, order=order, page=1)


def pivot(rows: Iterable[object], devices_order: Sequence[str] | None = None) -> tuple[list[MatrixRow], list[str]]:
    """Fold per-(architecture, device) rows (``service.schemas.ArchitectureRow``) into one row per architecture.

    Returns the rows in rank order and the devices seen (in ``devices_order`` first, then alphabetically).
    """
    by_name: dict[str, MatrixRow] = {}
    devices: set[str] = set()
    for r in rows:
        row = by_name.get(r.name)
        if row is None:
            row = by_name[r.name] = MatrixRow(name=r.name, rank=r.rank, model_type=r.model_type,
                                              representative=r.representative, remote_code=r.remote_code)
        devices.add(r.device)
        row.rank = min(row.rank, r.rank)
        row.supported[r.device] = r.supported
        for check, status in r.statuses.items():
            row.cells[(r.device, check)] = status
        for check, ops in r.fallback_ops.items():
            row.fallback_ops[(r.device, check)] = list(ops)
        if row.blocking_op is None and r.blocking_op:
            row.blocking_op = r.blocking_op
        if row.error is None and r.error:
            row.error = r.error
    ordered = [d for d in (devices_order or []) if d in devices]
    ordered += sorted(devices - set(ordered))
    return sorted(by_name.values(), key=lambda m: (m.rank, m.name)), ordered


def columns(rows: Sequence[MatrixRow], devices: Sequence[str], query: MatrixQuery) -> list[tuple[str, str]]:
    """Visible (device, check) columns: checks in the canonical order, only those some row has a result for."""
    present = {c for r in rows for c in r.cells}
    checks = [str(c) for c in ALL_CHECKS] + sorted({c for _, c in present} - {str(c) for c in ALL_CHECKS})
    return [(d, c) for d in devices for c in checks
            if (d, c) in present and (not query.device or d == query.device) and (not query.check or c == query.check)]


def _matches_status(row: MatrixRow, cols: Sequence[tuple[str, str]], status: str) -> bool:
    """``compat.status_filter.matches`` per device shown: ``supported`` on every device, any other word on some
    device, over the columns shown. An unknown word filters nothing (the page's lenient parse)."""
    try:
        word = status_filter.normalise(status)
    except ValueError:
        return True
    devices = sorted({d for d, _ in cols})
    if not devices:
        return False
    hits = [status_filter.matches({c: s for (dd, c), s in row.cells.items() if dd == d}, word,
                                  {c for dd, c in cols if dd == d}) for d in devices]
    return all(hits) if word == "supported" else any(hits)


def _matches_search(row: MatrixRow, needle: str) -> bool:
    hay = f"{row.name} {row.model_type} {row.representative or ''} {row.blocking_op or ''}".lower()
    return all(word in hay for word in needle.lower().split())


def _sort_key(row: MatrixRow, key: str, cols: Sequence[tuple[str, str]]):  # noqa: ANN202 - heterogeneous tuple
    if key == "name":
        return (row.name.lower(),)
    if key == "type":
        return (row.model_type, row.rank)
    if key == "failures":
        return (-row.failures(cols), row.rank)
    if ":" in key:  # a column "device:check": worst status first, missing last
        st = row.cells.get(tuple(key.split(":", 1)))  # type: ignore[arg-type]
        return (_SEVERITY.get(Status(st), 99) if st in _SEVERITY else 100, row.rank)
    return (row.rank, row.name)


def apply(rows: Sequence[MatrixRow], cols: Sequence[tuple[str, str]], query: MatrixQuery) -> list[MatrixRow]:
    """Filter by status (within visible columns) and search text, then sort; pagination is separate."""
    out = [r for r in rows
           if (not query.status or _matches_status(r, cols, query.status))
           and (not query.q or _matches_search(r, query.q))]
    valid = set(SORT_KEYS) | {f"{d}:{c}" for d, c in cols}
    key = query.sort if query.sort in valid else "rank"
    out.sort(key=lambda r: _sort_key(r, key, cols), reverse=query.order == "desc")
    return out


def paginate(rows: Sequence[MatrixRow], page: int, per_page: int = PER_PAGE) -> tuple[list[MatrixRow], int, int]:
    """(rows of ``page``, the page actually shown after clamping, number of pages)."""
    pages = max(1, -(-len(rows) // per_page))
    page = min(max(1, page), pages)
    return list(rows[(page - 1) * per_page: page * per_page]), page, pages
