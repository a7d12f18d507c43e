"""Shared foundation of neuron-compat: the one settings object and the one result schema.

Every other package (worker, service, dashboards) imports from here; this package imports none of them.
"""
