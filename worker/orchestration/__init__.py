"""The orchestration layer: sweeps, executors (in-process, Celery), nightly, submissions and the ``compat`` CLI.

The only part of the project that imports both the harness stages and the service.
"""
