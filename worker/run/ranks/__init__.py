"""The 2-rank process group of the fsdp/tp checks: its launcher and one rank's program.

Below the checks; uses the reference and the process helpers.
"""
