"""Device profiles: the generated JSON op tables (profiles/<name>.json) loaded and validated into a Profile.

A profile is data with provenance (profile_sources/): hardware, op classes, dtype rules, known issues, decisions.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch

PROFILE_DIR = Path(__file__).with_name("profiles")
CLASSES = ("native", "composite", "cpu_fallback", "unsupported")


class ProfileError(ValueError):
    """A profile name that is not shipped, or a profile file that fails validation (the message names the entry)."""


def available() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


@dataclass(frozen=True)
class Hardware:
    generation: str
    neuroncore: str
    cores_per_chip: int
    hbm_per_chip_bytes: int
    lnc_default: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class KnownIssue:
    """An op (optionally only for some dtypes, or when a named precondition fails) that fails on the real device."""

    op: str
    reason: str
    source: str
    dtypes: frozenset[torch.dtype] | None = None
    precondition: str | None = None
    confidence: str = "medium"
    error: str = "RuntimeError"  # the exception class the real device raises
    cpu_retry: bool = True  # False: the real device raises before any CPU fallback (grouped_mm's can_handle)


@dataclass(frozen=True)
class CompileReject:
    """A neuronx-cc error code that rejects a compiled graph holding ``ops`` (every op when empty) whose data operand
    (the first tensor argument, the one scattered or multiplied) has one of ``dtypes``: a compiler rule, not an eager
    one."""

    code: str
    ops: frozenset[str]
    dtypes: frozenset[torch.dtype]
    reason: str
    source: str


@dataclass(frozen=True)
class OpEntry:
    cls: str
    dtypes: frozenset[torch.dtype] | None
    source: str
    confidence: str = "high"


@dataclass(frozen=True)
class Switch:
    """A decision the headline depends on, with its options (each saying what it models, with sources) and the
    option in force. ``measure``: "rerun" (run the affected architectures again) or "traces" (only moves an op
    between the device and the CPU fallback)."""

    id: str
    subject: str
    confidence: str
    default: str
    active: str
    options: dict[str, dict]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    measure: str
    other_option: str = "permissive"  # the non-default option lets more run ("permissive") or less ("strict")

    def sources(self, option: str) -> list[str]:
        return list(self.options[option]["sources"])


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    confidence: str
    source_date: str
    historical: bool
    hardware: Hardware
    entries: dict[str, OpEntry]
    default_class: str
    input_autocast: dict[torch.dtype, torch.dtype]
    rejected_dtypes: dict[torch.dtype, str]
    complex_decompose_default: bool
    matmul_autocast: str
    kernel_failures: dict[str, KnownIssue]
    sources: dict[str, dict]
    int64_ops: frozenset[str] = frozenset()
    host_sync_ops: frozenset[str] = frozenset()
    decisions: tuple[dict, ...] = ()
    switches: tuple[Switch, ...] = ()
    op_table_from: str = ""
    compile_rejects: tuple[CompileReject, ...] = ()
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    def compile_reject(self, op: str, data_dtype: torch.dtype | None) -> CompileReject | None:
        """The compiler rule that rejects ``op`` with this data dtype in a compiled graph, or None."""
        for r in self.compile_rejects:
            if (not r.ops or op in r.ops) and data_dtype in r.dtypes:
                return r
        return None

    def _entry(self, op: str) -> OpEntry | None:
        found = self.entries.get(op)
        if found is None and op.endswith("_") and not op.endswith("__"):
            # An in-place variant (sigmoid_) follows its functional op when that has a Neuron implementation; a
            # composite functional op (normal) says nothing about its in-place kernel (normal_ is per backend).
            found = self.entries.get(op[:-1])
            if found is not None and found.cls != "native":
                found = None
        return found

    def classification(self, op: str) -> str:
        """native | composite | cpu_fallback | unsupported for an ATen op name (``aten::add``); others default."""
        e = self._entry(op)
        return e.cls if e is not None else self.default_class

    def native_dtypes(self, op: str) -> frozenset[torch.dtype] | None:
        """Dtypes an op runs natively with (native or composite entries), or None."""
        e = self._entry(op)
        return e.dtypes if e is not None and e.cls in ("native", "composite") else None

    def source_of(self, op: str) -> str:
        """The cited reference (URL, or repo + path + commit) behind an op's class."""
        e = self._entry(op)
        key = e.source if e is not None else self.raw["default_class"]["source"]
        return self.sources[key]["ref"]

    @property
    def ops(self) -> dict[str, frozenset[torch.dtype]]:
        """Native ops with their dtypes (native and composite entries)."""
        return {op: e.dtypes for op, e in self.entries.items() if e.cls in ("native", "composite")}


def _dtype(name: str, where: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ProfileError(f"{where}: unknown dtype {name!r}")
    return dt


def _aten_exists(op: str) -> bool:
    return op.startswith("aten::") and isinstance(getattr(torch.ops.aten, op[6:], None), torch._ops.OpOverloadPacket)


def _parse(raw: dict, file: str) -> Profile:
    sources = raw["sources"]

    def cite(key: str, where: str) -> str:
        if not key or key not in sources or not sources[key].get("ref"):
            raise ProfileError(f"{file}: {where}: missing source {key!r}")
        return key

    groups = {g: frozenset(_dtype(n, f"{file}: dtypes.groups.{g}") for n in names)
              for g, names in raw["dtypes"]["groups"].items()}
    entries = {}
    for op, e in raw["ops"].items():
        where = f"ops[{op!r}]"
        if not _aten_exists(op):
            raise ProfileError(f"{file}: {where}: unknown op name for torch {torch.__version__}")
        if e.get("class") not in CLASSES:
            raise ProfileError(f"{file}: {where}: unknown class {e.get('class')!r}")
        dts = e.get("dtypes")
        if dts is not None and dts not in groups:
            raise ProfileError(f"{file}: {where}: unknown dtype group {dts!r}")
        for key in e.get("decision_sources", []):
            cite(key, where)
        entries[op] = OpEntry(e["class"], groups[dts] if dts else None, cite(e.get("source"), where),
                              e.get("confidence", "high"))
    issues = {}
    for i, k in enumerate(raw["known_issues"]):
        where = f"known_issues[{i}] ({k.get('op')})"
        if not _aten_exists(k["op"]):
            raise ProfileError(f"{file}: {where}: unknown op name for torch {torch.__version__}")
        issues[k["op"]] = KnownIssue(
            op=k["op"], reason=k["reason"], source=sources[cite(k.get("source"), where)]["ref"],
            dtypes=groups[k["dtypes"]] if k.get("dtypes") else None, precondition=k.get("precondition"),
            confidence=k.get("confidence", "medium"), error=k.get("error", "RuntimeError"),
            cpu_retry=k.get("cpu_retry", True))
    for i, k in enumerate(raw["known_issues"]):
        for key in k.get("also", []):
            cite(key, f"known_issues[{i}] ({k.get('op')})")
    switches = []
    for sw in raw.get("switches", []):
        where = f"switches[{sw.get('id')!r}]"
        if sw.get("default") not in sw.get("options", {}):
            raise ProfileError(f"{file}: {where}: default {sw.get('default')!r} is not one of its options")
        if sw.get("measure") not in ("rerun", "traces"):
            raise ProfileError(f"{file}: {where}: measure must be 'rerun' or 'traces'")
        if len(sw.get("options", {})) != 2 or sw.get("other_option") not in ("permissive", "strict"):
            raise ProfileError(f"{file}: {where}: two options, and other_option 'permissive' or 'strict'")
        for name, option in sw["options"].items():
            if not option.get("sources"):
                raise ProfileError(f"{file}: {where}.{name}: an option without a source")
            for key in option["sources"]:
                cite(key, f"{where}.{name}")
        switches.append(Switch(sw["id"], sw["subject"], sw["confidence"], sw["default"],
                               raw.get("active_switches", {}).get(sw["id"], sw["default"]), sw["options"],
                               tuple(sw.get("ops", [])), tuple(sw.get("dtypes", [])), sw["measure"],
                               sw["other_option"]))
    rejects = []
    for i, r in enumerate(raw.get("compile_rejects", [])):
        where = f"compile_rejects[{i}] ({r.get('code')})"
        for op in r.get("ops", []):
            if not _aten_exists(op):
                raise ProfileError(f"{file}: {where}: unknown op name {op!r} for torch {torch.__version__}")
        rejects.append(CompileReject(r["code"], frozenset(r.get("ops", [])),
                                     frozenset(_dtype(n, f"{file}: {where}") for n in r["dtypes"]), r["reason"],
                                     sources[cite(r.get("source"), where)]["ref"]))
    for i, d in enumerate(raw.get("decisions", [])):
        for key in d["sources"]:
            cite(key, f"decisions[{i}] ({d['subject']})")
    hw = raw["hardware"]
    for key in hw["sources"]:
        cite(key, "hardware")
    ia = raw["input_autocast"]
    cite(ia["source"], "input_autocast")
    cite(raw["default_class"]["source"], "default_class")
    cite(raw["matmul_autocast"]["source"], "matmul_autocast")
    cite(raw["complex_decompose_default"]["source"], "complex_decompose_default")
    if raw["default_class"]["class"] not in CLASSES:
        raise ProfileError(f"{file}: default_class: unknown class {raw['default_class']['class']!r}")
    if raw["matmul_autocast"]["value"] not in ("none", "bf16"):
        raise ProfileError(f"{file}: matmul_autocast: expected 'none' or 'bf16'")
    return Profile(
        name=raw["name"],
        summary=raw["summary"],
        confidence=raw["confidence"],
        source_date=raw["source_date"],
        historical=bool(raw["historical"]),
        hardware=Hardware(hw["generation"], hw["neuroncore"], int(hw["cores_per_chip"]),
                          int(hw["hbm_per_chip_bytes"]), int(hw["lnc_default"]),
                          tuple(sources[k]["ref"] for k in hw["sources"])),
        entries=entries,
        default_class=raw["default_class"]["class"],
        input_autocast={_dtype(a, f"{file}: input_autocast"): _dtype(b, f"{file}: input_autocast")
                        for a, b in ia["map"].items()},
        rejected_dtypes={_dtype(n, f"{file}: rejected_dtypes"):
                         f"{r['reason']} ({sources[cite(r.get('source'), f'rejected_dtypes[{n!r}]')]['ref']})"
                         for n, r in raw["rejected_dtypes"].items()},
        complex_decompose_default=bool(raw["complex_decompose_default"]["value"]),
        matmul_autocast=raw["matmul_autocast"]["value"],
        kernel_failures=issues,
        sources=sources,
        int64_ops=frozenset(raw.get("int64_ops", [])),
        host_sync_ops=frozenset(raw["host_sync"]["ops"]),
        decisions=tuple(raw.get("decisions", [])),
        switches=tuple(switches),
        op_table_from=raw.get("op_table_from", ""),
        compile_rejects=tuple(rejects),
        raw=raw,
    )


def parse_file(path: Path) -> Profile:
    """Parse and validate one profile file; failures raise ProfileError naming the file and the entry."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ProfileError(f"{path.name}: cannot read: {e}") from e
    try:
        return _parse(raw, path.name)
    except KeyError as e:
        raise ProfileError(f"{path.name}: missing field {e}") from e


def apply_switches(raw: dict, chosen: tuple[tuple[str, str], ...], file: str) -> dict:
    """A copy of a profile's raw data with each chosen switch option's patch applied (the default options have
    none: the tables already model them). Unknown switches or options raise ProfileError naming the valid ones."""
    by_id = {sw["id"]: sw for sw in raw.get("switches", [])}
    out = copy.deepcopy(raw)
    out["active_switches"] = {}
    for sid, option in chosen:
        sw = by_id.get(sid)
        if sw is None:
            raise ProfileError(f"{file}: unknown switch {sid!r}; valid switches: {', '.join(by_id) or 'none'}")
        if option not in sw["options"]:
            raise ProfileError(f"{file}: switch {sid!r} has no option {option!r}; options: "
                               f"{', '.join(sw['options'])}")
        out["active_switches"][sid] = option
        patch = sw["options"][option].get("patch", {})
        dropped = set(patch.get("drop_known_issues", []))
        out["known_issues"] = [k for k in out["known_issues"] if k["op"] not in dropped]
        for op in patch.get("drop_ops", []):
            out["ops"].pop(op, None)
        out["ops"].update(copy.deepcopy(patch.get("set_ops", {})))
        out["rejected_dtypes"].update(copy.deepcopy(patch.get("reject_dtypes", {})))
        out["known_issues"] = [*out["known_issues"], *copy.deepcopy(patch.get("add_known_issues", []))]
        if "complex_decompose_default" in patch:
            out["complex_decompose_default"] = {**out["complex_decompose_default"],
                                                "value": patch["complex_decompose_default"]}
    return out


@cache
def _raw(name: str) -> dict:
    path = PROFILE_DIR / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ProfileError(f"{path.name}: cannot read: {e}") from e


@cache
def load(name: str, switches: tuple[tuple[str, str], ...] = ()) -> Profile:
    """Load a shipped profile by name, with ``switches`` ((id, option) pairs) set; an unknown name fails with one
    line listing the valid ones."""
    if name not in available():
        raise ProfileError(f"unknown NEURON_PROFILE {name!r}; valid profiles: {', '.join(available())}")
    if not switches:
        return parse_file(PROFILE_DIR / f"{name}.json")
    raw = apply_switches(_raw(name), switches, f"{name}.json")
    try:
        return _parse(raw, f"{name}.json")
    except KeyError as e:
        raise ProfileError(f"{name}.json: missing field {e}") from e


def parse_switches(text: str) -> tuple[tuple[str, str], ...]:
    """``"id=option,id=option"`` (NEURON_SWITCHES) -> sorted pairs; a malformed item raises ProfileError."""
    pairs = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        sid, eq, option = item.partition("=")
        if not eq or not sid.strip() or not option.strip():
            raise ProfileError(f"NEURON_SWITCHES: {item!r} is not ID=OPTION")
        pairs[sid.strip()] = option.strip()
    return tuple(sorted(pairs.items()))
