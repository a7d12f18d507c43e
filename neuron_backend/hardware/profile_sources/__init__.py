"""Cited source snapshots of the device profiles and the generator that turns them into neuron_backend/hardware/profiles/*.json.

Regenerate with ``python -m neuron_backend.hardware.profile_sources.build``; refresh the source snapshot with extract.py.
"""
