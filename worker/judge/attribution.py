"""Attribution: turn an exception raised by a device check into a Status, the blocking aten op and an error digest.

Pure functions over exception objects; the device's own exception types are recognised by duck typing so this
module imports neither neuron_backend nor torch-neuronx.
"""

from __future__ import annotations

import hashlib
import re
import traceback as tb
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from compat.ops import join_op, split_op
from compat.results import ErrorInfo, Status

# c10::ScalarType names, the spelling PyTorch uses in its own dispatcher errors ("not implemented for 'Half'").
_DTYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}
MAX_MESSAGE = 2000
MAX_TRACEBACK_LINES = 30

_COULD_NOT_RUN = re.compile(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend")
_NOT_IMPL_FOR = re.compile(r"\"(\w+)\" not implemented for '(\w+)'")
_OPERATOR_NOT_IMPL = re.compile(r"operator '([\w:.]+)' is not currently implemented")
_OOM = re.compile(r"out of memory|can't allocate memory|CUDA error: out of memory|Tried to allocate", re.I)


@dataclass(frozen=True)
class Attribution:
    status: Status
    blocking_op: str | None
    error: ErrorInfo
    digest: str
    op_from_device: bool = False  # the op came from the device's own error (.op) or a dispatcher message


def dtype_name(dtype: object) -> str:
    """``torch.float32`` -> ``Float``; strings pass through ("Float", "torch.float32" -> "Float")."""
    if isinstance(dtype, torch.dtype):
        return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
    text = str(dtype)
    if text.startswith("torch."):
        dt = getattr(torch, text.removeprefix("torch."), None)
        if isinstance(dt, torch.dtype):
            return _DTYPE_NAMES.get(dt, text.removeprefix("torch."))
    return text


def op_name(op: object) -> str:
    """Normalise an op to ``aten::name``: accepts OpOverloads, ``aten.mm.default``, ``aten::mm``, ``mm``."""
    text = getattr(op, "name", None)
    if callable(text):  # torch._ops.OpOverload.name() -> "aten::mm"
        text = text()
    text = str(text if text else op)
    if "::" not in text:
        parts = text.split(".")
        if len(parts) >= 2 and parts[0] in {"aten", "prims", "torch"}:
            text = f"{parts[0]}::{parts[1]}"
        else:
            text = f"aten::{parts[0]}"
    ns, _, rest = text.partition("::")
    return f"{ns}::{rest.split('.')[0]}"


def format_op(op: object, dtypes: object = None) -> str:
    """``aten::histc (Long)``: the spelling shared by op traces, blocking ops and blocker rankings."""
    name = op_name(op)
    if not dtypes:
        return name
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = [dtypes]
    names = sorted({dtype_name(d) for d in dtypes})  # type: ignore[union-attr]
    return join_op(name, names)


def error_info(exc: BaseException) -> ErrorInfo:
    lines = tb.format_exception(type(exc), exc, exc.__traceback__)
    short = "".join(lines).splitlines()[-MAX_TRACEBACK_LINES:]
    cls = type(exc)
    return ErrorInfo(type=f"{cls.__module__}.{cls.__qualname__}".removeprefix("builtins."),
                     message=str(exc)[:MAX_MESSAGE], traceback="\n".join(short))


def raised_at(exc: BaseException, libraries: tuple[str, ...] = ()) -> str | None:
    """Where ``exc`` was raised, as ``package/path.py:LINE in function`` (the path from site-packages on): the
    innermost frame inside one of ``libraries`` (e.g. ``("trl/",)``: the library the check drives, not the config
    accessor or module call it raised through), else the innermost frame."""
    frames = tb.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    rel = [(f.filename.replace("\\", "/").split("site-packages/")[-1], f) for f in frames]
    inside = [pair for pair in rel if libraries and pair[0].startswith(libraries)]
    if not rel:
        return None
    path, frame = (inside or rel)[-1]
    return f"{path}:{frame.lineno} in {frame.name}"


def error_digest(exc_type: str, message: str) -> str:
    """A stable 12-hex id for 'the same error': class + message with numbers, hex and quoted paths blanked."""
    norm = re.sub(r"0x[0-9a-f]+|\d+", "N", message.splitlines()[0] if message else "")
    norm = re.sub(r"(/[\w.\-]+)+", "PATH", norm)
    return hashlib.sha1(f"{exc_type}:{norm}".encode()).hexdigest()[:12]


def _is_device_op_error(exc: BaseException) -> bool:
    # neuron_backend.NeuronUnsupportedOpError (and its dtype subclass) carry .op/.dtypes.
    return any(c.__name__ in {"NeuronUnsupportedOpError", "NeuronUnsupportedDtypeError"} for c in type(exc).__mro__)


def _is_device_dtype_error(exc: BaseException) -> bool:
    return any(c.__name__ == "NeuronUnsupportedDtypeError" for c in type(exc).__mro__)


def _innermost(exc: BaseException) -> BaseException:
    """Find the device error that started it (accelerate and HF re-wrap errors; so does torch.compile).

    Follows __cause__/__context__ and the links Dynamo keeps instead: BackendCompilerFailed.inner_exception (raised
    ``from None``) and the typed error a neuron graph break carries (``neuron_error``, as neuron_backend.unwrap_error).
    """
    for cur in _chain(exc):
        if _is_device_op_error(cur) or isinstance(cur, (torch.OutOfMemoryError, MemoryError)):
            return cur
    return exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from, breadth first, each once: __cause__, __context__ and the links
    Dynamo keeps instead (BackendCompilerFailed.inner_exception, a neuron graph break's ``neuron_error``)."""
    seen: set[int] = set()
    queue: list[BaseException | None] = [exc]
    while queue:
        cur = queue.pop(0)
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        queue += [getattr(cur, "inner_exception", None), getattr(cur, "neuron_error", None), cur.__cause__,
                  cur.__context__]


def attribute(exc: BaseException, failing_op: str | None = None) -> Attribution:
    """Classify ``exc``. ``failing_op`` is the op the dispatch-mode catcher saw raise first, if any."""
    root = _innermost(exc)
    info = error_info(root)
    digest = error_digest(info.type, info.message)
    msg = info.message
    if _is_device_op_error(root):
        op = format_op(getattr(root, "op", None) or failing_op or "unknown", getattr(root, "dtypes", None))
        status = Status.UNSUPPORTED_DTYPE if _is_device_dtype_error(root) else Status.UNSUPPORTED_OP
        return Attribution(status, op, info, digest, True)
    if isinstance(root, (torch.OutOfMemoryError, MemoryError)) or _OOM.search(msg):
        return Attribution(Status.OOM, failing_op, info, digest)
    if m := _COULD_NOT_RUN.search(msg):
        return Attribution(Status.UNSUPPORTED_OP, op_name(m.group(1)), info, digest, True)
    if m := _OPERATOR_NOT_IMPL.search(msg):
        return Attribution(Status.UNSUPPORTED_OP, op_name(m.group(1)), info, digest, True)
    if m := _NOT_IMPL_FOR.search(msg):
        # The kernel name ("addmm_impl_cpu_") is not an aten op; prefer the op the catcher saw.
        base = split_op(failing_op)[0] if failing_op else m.group(1)
        return Attribution(Status.UNSUPPORTED_DTYPE, f"{base} ({m.group(2)})", info, digest)
    return Attribution(Status.ERROR, failing_op, info, digest)


_COLLECTIVE = re.compile(r"\b(c10d::\w+|_c10d_functional::\w+|fsdp::\w+)")


def collective_of(exc: BaseException) -> str | None:
    """The collective a distributed failure happened in: the ``neuron_collective`` the simulated device's
    collectives attach to their errors (neuron_backend/collective_ops.py), else the first c10d-style op name in a
    message along the exception chain; None when the failure names no collective."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    found = None
    while stack:
        cur = stack.pop(0)
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        name = getattr(cur, "neuron_collective", None)
        if isinstance(name, str):
            return name
        if found is None and (m := _COLLECTIVE.search(str(cur))):
            found = m.group(1)
        stack += [cur.__cause__, cur.__context__]
    return found


# Transformers' own wording when a class needs an optional package (transformers/utils/import_utils.py,
# e.g. VISION_IMPORT_ERROR "{0} requires the PIL library ... `pip install pillow`", TIMM_IMPORT_ERROR "{0} requires
# the timm library ... `pip install timm`"; raised by ``requires_backends``), and the pip hint most of them carry.
_REQUIRES_LIBRARY = re.compile(r"requires the (?:\S+ )?([\w.-]+) library")
_PIP_INSTALL = re.compile(r"pip install (?:-U |--upgrade )?([A-Za-z0-9][\w.\[\]-]*)")


def missing_package(exc: BaseException) -> str | None:
    """The package a failure lacks, when an ``ImportError`` along its cause/context chain says so: ``timm (pip
    install timm)`` from Transformers' "requires the X library" text, the module name of a ``ModuleNotFoundError``,
    else the ImportError's first line; None when no ImportError is in the chain. A missing or broken package is the
    harness's environment, never the device's or the CPU reference's fault."""
    for cur in _chain(exc):
        if isinstance(cur, ImportError):
            text = " ".join(str(cur).split())
            pip = _PIP_INSTALL.search(text)
            hint = f" (pip install {pip.group(1).rstrip('.`')})" if pip else ""
            if m := _REQUIRES_LIBRARY.search(text):
                return m.group(1) + hint
            if isinstance(cur, ModuleNotFoundError) and cur.name:
                return cur.name.split(".")[0] + hint
            return (text[:200] or type(cur).__name__) + hint
    return None


def missing_package_reason(package: str, message: str) -> str:
    """The one wording of a missing package's record: what to install first, then what raised (one line)."""
    return f"missing package {package}: the harness's environment lacks it ({' '.join(message.split())})"[:500]


def reference_blame(exc: BaseException) -> tuple[Status, str]:
    """A CPU reference that raised: ``reference_fail`` with its message, unless it raised for a missing package,
    which is the harness's environment (``harness_error`` naming the package)."""
    if (package := missing_package(exc)) is not None:
        return Status.HARNESS_ERROR, missing_package_reason(package, str(exc))
    return Status.REFERENCE_FAIL, str(exc)[:500]
