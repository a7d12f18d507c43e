"""The CLI's heavy modules, each imported only when a command that needs it runs (torch, SQLAlchemy, FastAPI, Celery).

``compat --help`` and bad input answer without any of them; tests/layout's allow-list names each import here.
"""

from __future__ import annotations

from types import ModuleType


def harness() -> ModuleType:
    # Imported when a harness command runs: `compat --help` and bad input answer without torch and transformers.
    from cli import commands

    return commands


def database() -> ModuleType:
    # Imported when a database command runs: `compat --help` and bad input answer without SQLAlchemy and Alembic.
    from service import commands

    return commands


def cluster() -> ModuleType:
    # Imported when `compat worker` or `compat beat` runs: `compat --help` and bad input answer without Celery.
    from worker.orchestration import celery_app

    return celery_app


def stored() -> ModuleType:
    # Imported when an input check must look in the store (a run id; `show`'s uncatalogued names: reads.py): bad input
    # answers without SQLAlchemy otherwise, and never imports torch.
    from cli import stored

    return stored


def reads() -> ModuleType:
    # Imported when `compat show|blockers|runs list` runs: they read the store without torch; `--help` without SQLAlchemy.
    from cli import reads

    return reads


def lookup() -> ModuleType:
    # Imported when `compat lookup` runs: the store only (no torch, none of the other reads), under a second.
    from cli import lookup

    return lookup


def web() -> ModuleType:
    # Imported when `compat serve` runs: `compat --help` and bad input answer without FastAPI and uvicorn.
    from cli import serve

    return serve


def calibration() -> ModuleType:
    # Imported when `compat calibrate` runs: `compat --help` and bad input answer without torch and transformers.
    from cli import calibrate

    return calibrate
