"""Stage 1 of a sweep: which architectures to test, ranked (Transformers' registry, a Hub listing or its snapshot).

Imports nothing of the service or of the later stages.
"""
