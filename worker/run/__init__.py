"""Stage 3 of a sweep: run one architecture on the device and on the CPU reference, in isolated processes.

Imports the build and judge stages, never the service or the orchestration layer.
"""
