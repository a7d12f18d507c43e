"""The checks on the device (load, forward, generate, compile, train; lora, sft; fsdp, tp), judged.

Above ranks, reference and process; independent of repro.
"""
