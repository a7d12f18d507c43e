"""Process-level helpers: the worker pool, output capture, device resolution, stack room.

The bottom floor of worker/run: imports nothing else of it.
"""
