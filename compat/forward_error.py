"""A forward's two errors in words, one spelling for `compat show`, the architecture page and `compat repro`: the
judged error (against the CPU at the device's modelled precision) and the error against plain fp32 on the CPU.

Pure: a result record in, text out. The tolerance rule that judges the first is worker/judge/judge.py's, unchanged.
"""

from __future__ import annotations

from compat.results import ResultRecord

# How both figures are rounded wherever they are printed (the repro script states the same rounding).
MAX_ABS_FORMAT = ".3g"  # max abs err: 3 significant digits
COSINE_FORMAT = ".6f"  # cosine: 6 decimals
ROUNDING = "max abs err to 3 significant digits, cosine to 6 decimals"

# The one line that says why the judged error is 0 on the simulated device (issue 30 item 2).
WHY_JUDGED_IS_ZERO = (
    "judged = against the CPU reference at the device's modelled precision (numerics policy bf16_matmul: matmul "
    "operands rounded to bf16, as the Neuron compiler's default auto-cast), where the tolerance rule applies; the "
    "simulated device computes with the same host kernels and the same rounding, so its judged error is 0. fp32 = "
    f"against plain fp32 on the CPU, what `compat repro` prints ({ROUNDING})"
)

# What a `compat repro` script says under its forward line: which of `compat show`'s two figures it reproduces.
REPRO_NOTE = (
    "this is the fp32 figure of `compat show` (device vs plain fp32 on the CPU); the judged one compares with the "
    "CPU at the device's modelled precision (bf16_matmul on neuron: matmul operands rounded to bf16), which the "
    "simulated device matches exactly, so its judged error is 0"
)


def figures(max_abs_err: float, cosine: float) -> str:
    """``max abs err 0.0031, cosine 0.999992``: the spelling of one comparison."""
    return f"max abs err {max_abs_err:{MAX_ABS_FORMAT}}, cosine {cosine:{COSINE_FORMAT}}"


def judged_figures(rec: ResultRecord) -> str | None:
    """The judged comparison's figures (the record's metrics), or None when it has none (not a numeric check, or
    a failure before the comparison)."""
    m = rec.metrics
    if "cosine" not in m or "max_abs_err" not in m:
        return None
    return figures(float(m["max_abs_err"]), float(m["cosine"]))


def fp32_figures(rec: ResultRecord) -> str | None:
    """The comparison with plain fp32 (the record's fp32 fields), or None where not measured (older records)."""
    if rec.fp32_max_abs_err is None or rec.fp32_cosine is None:
        return None
    return figures(rec.fp32_max_abs_err, rec.fp32_cosine)


def error_text(rec: ResultRecord) -> str | None:
    """Both errors of a forward/compile record: ``judged max abs err 0, cosine 1.000000; fp32 max abs err 0.0031,
    cosine 0.999992``; only the judged one for records stored before the fp32 figures; None without either."""
    judged, fp32 = judged_figures(rec), fp32_figures(rec)
    parts = [f"judged {judged}"] if judged else []
    if fp32:
        parts.append(f"fp32 {fp32}")
    return "; ".join(parts) or None


def why_note(records: list[ResultRecord]) -> str | None:
    """``WHY_JUDGED_IS_ZERO`` where it applies: some record has both figures and was judged under a reduced
    precision policy (on an fp32 policy the judged reference is plain fp32, and the two figures are one)."""
    if any(fp32_figures(r) and judged_figures(r) and r.metrics.get("policy", "fp32") != "fp32" for r in records):
        return WHY_JUDGED_IS_ZERO
    return None
