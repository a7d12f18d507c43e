"""The orchestration layer: sweeps, executors (in-process, Celery), Celery app and tasks, nightly, submissions.

It drives the harness stages and writes through the service's store; the ``compat`` CLI (``cli/``) drives it.
"""
