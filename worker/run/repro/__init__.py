"""Standalone `compat repro` scripts: the sweep's tiny config, seed, inputs and check, no harness import.

Reads the reference's constants and input table; independent of checks.
"""
