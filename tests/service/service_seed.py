"""Builders of runs and results for the service tests (imported by conftest and the test modules).

Named apart from ``service`` so the test directory on sys.path never shadows the real package.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import text

from compat.results import (
    ArchitectureEntry,
    Check,
    DeviceInfo,
    ErrorInfo,
    ResultRecord,
    RunInfo,
    Status,
    Trigger,
)
from service import db


def make_run(device: str = "neuron", *, run_id: str | None = None, trigger: Trigger = Trigger.MANUAL,
             started: datetime | None = None, catalog_source: str = "snapshot") -> RunInfo:
    """A run over a Hub-ranked catalog (ARCHS carry download ranks) unless ``catalog_source`` says otherwise."""
    return RunInfo(
        id=run_id or uuid.uuid4().hex, trigger=trigger,
        device=DeviceInfo(name=device, simulated=device == "neuron", torch_version="2.13.0"),
        started=started or datetime.now(UTC), catalog_source=catalog_source,
        snapshot_id="snap-1" if catalog_source == "snapshot" else None,
    )


ARCHS = [
    ArchitectureEntry(name="LlamaForCausalLM", model_type="llama", rank=1, downloads=1000),
    ArchitectureEntry(name="Qwen2ForCausalLM", model_type="qwen2", rank=2, downloads=900),
    ArchitectureEntry(name="GPT2LMHeadModel", model_type="gpt2", rank=3, downloads=800),
    ArchitectureEntry(name="MixtralForCausalLM", model_type="mixtral", rank=4, downloads=700),
]
CHECKS = [Check.LOAD, Check.FORWARD, Check.GENERATE]


def rec(arch: str, check: Check, status: Status = Status.PASS, device: str = "neuron", **kw) -> ResultRecord:
    rank = next((a.rank for a in ARCHS if a.name == arch), None)
    if status in (Status.ERROR, Status.UNSUPPORTED_OP) and "error" not in kw:
        kw["error"] = ErrorInfo(type="RuntimeError", message=f"{arch} {check} failed")
    return ResultRecord(architecture=arch, rank=rank, device=device, check=check, status=status, **kw)


def seed(store, device: str = "neuron", failing: dict[str, Status] | None = None,
         started: datetime | None = None, trigger: Trigger = Trigger.MANUAL) -> str:
    """A finished run over ARCHS x CHECKS where ``failing`` archs fail their forward check."""
    failing = failing or {}
    run = make_run(device, trigger=trigger, started=started)
    planned = [(a.name, device, str(c)) for a in ARCHS for c in CHECKS]
    store.start_run(run, ARCHS, planned)
    records = []
    for a in ARCHS:
        for c in CHECKS:
            status = failing[a.name] if a.name in failing and c == Check.FORWARD else Status.PASS
            kw = {"blocking_op": "aten::histc (Long)"} if status == Status.UNSUPPORTED_OP else {}
            records.append(rec(a.name, c, status, device, repro=f"compat repro {a.name}", **kw))
    store.add_results(run.id, records)
    store.finish_run(run.id)
    return run.id


def times(n: int) -> list[datetime]:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    return [base + timedelta(days=i) for i in range(n)]


def migrate(db_url: str, revision: str, step: str = "upgrade") -> None:
    """Move the schema to ``revision`` (``step`` "upgrade" or "downgrade"): for migration tests that need the schema
    as it was before one migration."""
    cfg = db._alembic_config(db_url)
    with db.get_engine(db_url).begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, step)(cfg, revision)


def insert_bare_run(db_url: str, run_id: str = "r") -> None:
    """A device row and a finished run written as raw SQL, with only the columns every schema since 0003 has."""
    with db.get_engine(db_url).begin() as conn:
        conn.execute(text("INSERT INTO devices (name, simulated, description, torch_version, backend_version, "
                          "details) VALUES ('neuron', false, '', '', '', '{}')"))
        conn.execute(text("INSERT INTO runs (id, trigger, device, catalog_source, versions, checks, device_info, "
                          "started, state, planned_count) VALUES (:id, 'manual', 'neuron', 'x', '{}', '[]', '{}', "
                          "'2026-01-01', 'complete', 0)"), {"id": run_id})
