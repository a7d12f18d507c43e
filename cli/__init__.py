"""The ``compat`` command line and the deployed app's assembly: the top of the import graph (nothing imports it).

It drives ``worker.orchestration`` and composes ``service`` and ``dashboards`` (``serve.py``: the deployed app).
"""
