"""The harness: the stages of a sweep (catalog, build, run, judge) and the orchestration layer that drives them.

The stages never import the service; ``worker.orchestration`` is the one layer that imports both. Nothing here
imports ``cli`` (the command line and the deployed app, above it).
"""
