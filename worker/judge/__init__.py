"""Stage 4 of a sweep: pure verdicts on what the run measured, failure attribution, known issues.

Imports nothing of the service or of the other stages.
"""
