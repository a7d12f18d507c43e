"""Stage 2 of a sweep: a tiny random-weight checkpoint of an architecture (``tiny_config.shrink``, ``build``).

Imports nothing of the later stages (run, judge), the service or the orchestration layer.
"""
