"""Refresh the committed source snapshot from a local git mirror of the torch-neuronx source (run by hand, rarely).

Reads registrations out of the mirror with git (no network) and writes torch_neuronx_source.json next to this file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
DEFAULT_MIRROR = "/work/.mirror/parmoham-aws+test-repo-parmoham/repo"
REPO = "parmoham-aws/test-repo-parmoham"

_NEURON_OP = re.compile(r'^\s*@neuron(?:_\w+)?_op\(\s*"aten::([\w.]+)"', re.M)
_REGISTER_ATEN = re.compile(r"register_aten\(\s*\[([^\]]*)\]", re.S)
_REGISTER_ONE = re.compile(r'register_aten\(\s*"aten::([\w.]+)"')  # the single-op form
_ATEN_STR = re.compile(r'"aten::([\w.]+)"')
_LIB_IMPL = re.compile(r'aten_lib\.impl\(\s*"([\w.]+)",\s*[\w.]+,\s*"PrivateUse1"', re.S)
_CPP_IMPL = re.compile(r'^\s*m\.impl\("([\w.]+)"', re.M)
_CPU_FALLBACK = re.compile(r'\("(\w+)",\s*torch\.ops\.aten\.')


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], check=True, capture_output=True, text=True).stdout


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _active(path: str) -> bool:
    # torch_neuronx/python_ops/auto_registration.py discover_all_implementations skips the .legacy and .jax packages
    return path.endswith(".py") and "/legacy/" not in path and "/jax/" not in path and "/test" not in path


def extract(mirror: str) -> dict:
    commit = _git(mirror, "rev-parse", "HEAD").strip()
    files = _git(mirror, "ls-tree", "-r", "HEAD", "--name-only").split()
    native: dict[str, list[str]] = {}  # "aten::name.overload" -> ["path:line", ...]
    unregistered: dict[str, list[str]] = {}

    def add(table: dict, name: str, path: str, line: int) -> None:
        table.setdefault("aten::" + name, []).append(f"{path}:{line}")

    for path in files:
        if not path.startswith("torch_neuronx/python_ops/") or not path.endswith(".py"):
            continue
        text = _git(mirror, "show", f"HEAD:{path}")
        target = native if _active(path) else unregistered
        for m in _NEURON_OP.finditer(text):
            add(target, m.group(1), path, _line(text, m.start()))
        for m in _REGISTER_ATEN.finditer(text):
            if text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith("#"):
                continue
            for s in _ATEN_STR.finditer(m.group(1)):
                add(target, s.group(1), path, _line(text, m.start()))
        for m in _REGISTER_ONE.finditer(text):
            add(target, m.group(1), path, _line(text, m.start()))
        if path == "torch_neuronx/python_ops/__init__.py":
            for m in _LIB_IMPL.finditer(text):
                add(native, m.group(1), path, _line(text, m.start()))
    cpp = "torch_neuronx/csrc/core/NeuronBindings.cpp"
    text = _git(mirror, "show", f"HEAD:{cpp}")
    start = text.index("TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)")
    end = text.index("\n}", start)
    for m in _CPP_IMPL.finditer(text, start, end):
        add(native, m.group(1), cpp, _line(text, m.start()))
    # Views the boxed CPU fallback runs without a warning and without tracking them in get_fallback_ops()
    # (neuron_cpu_fallback skips markFallbackLogged for VIEW_OPS_WHITELIST): metadata-only on the device.
    start = text.index("VIEW_OPS_WHITELIST = {")
    end = text.index("};", start)
    untracked_views = {"aten::" + m.group(1): f"{cpp}:{_line(text, m.start())}"
                       for m in _ATEN_STR.finditer(text, start, end)}
    fb_path = "torch_neuronx/python_ops/cpu_fallback_registrations.py"
    text = _git(mirror, "show", f"HEAD:{fb_path}")
    cpu_fallback = {"aten::" + m.group(1): f"{fb_path}:{_line(text, m.start())}" for m in _CPU_FALLBACK.finditer(text)}
    return {
        "repo": REPO,
        "commit": commit,
        "note": "Pre-beta public copy of the torch-neuronx source (April 2026): INDICATIVE, not the release. "
                "Registrations are those the active registration path makes (python_ops/__init__.py "
                "register_python_operations -> _register_common_ops, auto_register_neuron_ops, torch-mlir "
                "finalize_registrations; csrc/core/NeuronBindings.cpp TORCH_LIBRARY_IMPL(aten, PrivateUse1)).",
        "native": {k: sorted(set(v)) for k, v in sorted(native.items())},
        "cpu_fallback": dict(sorted(cpu_fallback.items())),
        "untracked_views": dict(sorted(untracked_views.items())),
        "present_not_registered": {k: sorted(set(v)) for k, v in sorted(unregistered.items()) if k not in native},
        "present_not_registered_note": "Defined under python_ops/legacy or python_ops/jax, which "
                                       "auto_registration.py discover_all_implementations skips "
                                       "('Skip legacy and JAX packages'); listed only to document decisions.",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mirror", default=DEFAULT_MIRROR)
    args = ap.parse_args(argv)
    out = HERE / "torch_neuronx_source.json"
    out.write_text(json.dumps(extract(args.mirror), indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
