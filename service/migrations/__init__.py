"""Alembic migrations of the results store, driven programmatically by ``service.db.upgrade``.

No alembic.ini: the script location is this package, so the installed package migrates from any cwd.
"""
