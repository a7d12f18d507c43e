"""The CPU side of every check: references, their cache, inputs, precision emulation, op trace.

Also the lora/sft computations (run on the CPU and the device alike) and the check context.
"""
