"""Profiles as generated data: trn2/trn3/legacy-xla ship, regenerate from the committed cited snapshots to the same
JSON, carry the documented hardware and dtype rules, and fail to load on bad input naming the entry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from neuron_backend import policy
from neuron_backend.hardware import profiles
from neuron_backend.hardware.profile_sources import build, extract

GIB = 1 << 30
MIRROR = Path(extract.DEFAULT_MIRROR)
_CITED = re.compile(r"https?://|github\.com/[\w.-]+/[\w.-]+ @ [0-9a-f]{40}|installed torch")


def test_shipped_profiles_are_exactly_the_generated_ones():
    assert profiles.available() == ["legacy-xla", "trn2", "trn3"]
    generated = build.build()
    for name in profiles.available():
        shipped = json.loads((profiles.PROFILE_DIR / f"{name}.json").read_text())
        # Regenerating (python -m neuron_backend.hardware.profile_sources.build) must reproduce the committed file.
        assert shipped == json.loads(json.dumps(generated[name])), f"{name}.json is stale: regenerate it"


def test_every_source_is_cited_and_indicative_ones_say_so():
    for name in profiles.available():
        prof = profiles.load(name)
        for key, src in prof.sources.items():
            assert _CITED.search(src["ref"]), (key, src["ref"])
            assert src["retrieved"] in ("full", "excerpt", "no")
            if src["indicative"]:
                assert "INDICATIVE" in src["says"], key
        assert "not retriev" in prof.sources["docs-compat-table"]["says"].lower()
        assert prof.source_of("aten::add").startswith(("github.com", "https://"))


@pytest.mark.parametrize("name, gen, core, cores, hbm, lnc", [
    ("trn2", "Trn2", "NeuronCore-v3", 8, 96 * GIB, 2),
    ("trn3", "Trn3", "NeuronCore-v4", 8, 144 * GIB, 2),
    ("legacy-xla", "Trn1", "NeuronCore-v2", 2, 32 * GIB, 1),
])
def test_hardware_per_generation(name, gen, core, cores, hbm, lnc):
    hw = profiles.load(name).hardware
    assert (hw.generation, hw.neuroncore, hw.cores_per_chip, hw.hbm_per_chip_bytes, hw.lnc_default) == (
        gen, core, cores, hbm, lnc)
    assert hw.sources and all(s.startswith("https://") for s in hw.sources)


def test_native_profiles_dtype_rules():
    for name in ("trn2", "trn3"):
        prof = profiles.load(name)
        assert prof.input_autocast == {torch.float64: torch.float32, torch.int64: torch.int32}
        fnuz = {torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}
        assert all("EVRF005" in prof.rejected_dtypes[d] for d in fnuz)
        # float8 e4m3fn/e5m2 run in eager on real Trn2 (whn09/xpu-perf); compiled e4m3fn is a compile reject there
        assert set(prof.rejected_dtypes) == fnuz, name
        fp8_rule = prof.compile_reject("aten::mm", torch.float8_e4m3fn)
        assert (fp8_rule is not None and fp8_rule.code == "NCC_EVRF051") == (name == "trn2"), name
        assert prof.compile_reject("aten::mm", torch.float8_e5m2) is None
        assert prof.complex_decompose_default is True and prof.matmul_autocast == "bf16"
        assert prof.default_class == "cpu_fallback" and not prof.historical
        assert prof.source_date == "2026-11-06"


def test_trn2_classes_follow_the_source():
    prof = profiles.load("trn2")
    for op in ("aten::add", "aten::mm", "aten::nonzero", "aten::nonzero_static", "aten::masked_select",
               "aten::repeat_interleave", "aten::_grouped_mm", "aten::index", "aten::rms_norm", "aten::view"):
        assert prof.classification(op) == "native", op
    for op in ("aten::linalg_qr", "aten::_linalg_svd", "aten::triangular_solve"):
        assert prof.classification(op) == "cpu_fallback" and "cpu_fallback_registrations.py" in prof.source_of(op)
    # no Neuron implementation: the boxed fallback catches it
    assert prof.classification("aten::multinomial") == "cpu_fallback"
    assert "NeuronBindings.cpp" in prof.source_of("aten::multinomial")
    assert prof.classification("aten::quantize_per_tensor") == "unsupported"
    assert prof.classification("aten::sigmoid_") == "native"  # in-place follows a native functional op
    assert prof.classification("aten::normal_") == "cpu_fallback"  # ... but not a composite one (normal)
    assert prof.classification("aten::randn") == "composite"


def test_legacy_xla_is_the_41_op_page_and_says_it_was_never_an_allow_list():
    prof = profiles.load("legacy-xla")
    assert prof.historical and "never a strict allow-list" in prof.confidence
    page = [ln.strip() for ln in (build.HERE / "legacy_xla_supported_operators.txt").read_text().splitlines()
            if ln.startswith("aten::")]
    assert len(page) == 41
    from_page = {op for op, e in prof.entries.items() if e.source == "docs-legacy-ops"}
    assert len(from_page) == 40 and prof.raw["not_in_installed_torch"] == ["aten::_s_where"]
    assert prof.classification("aten::amax") == "cpu_fallback"  # not on the page
    assert prof.classification("aten::nonzero") == "cpu_fallback"  # XLA ran it on the CPU
    assert prof.input_autocast == {} and prof.hardware.neuroncore == "NeuronCore-v2"
    assert "EVRF004" in prof.rejected_dtypes[torch.complex64]  # no framework complex decomposition before TorchNeuron


def test_low_confidence_decisions_are_documented_with_sources():
    prof = profiles.load("trn2")
    low = {d["subject"]: d for d in prof.decisions if d["confidence"] == "low"}
    assert "aten::histc on integer inputs" in low and "integer matmul" in " ".join(low)
    assert all(set(d["sources"]) <= set(prof.sources) for d in prof.decisions)
    assert prof.entries["aten::histc"].confidence == "low"
    assert prof.native_dtypes("aten::histc") == frozenset({torch.float32, torch.bfloat16, torch.float16, torch.float64})


def test_pytorch_cpu_has_no_integer_histc():
    # The fact the histc decision rests on (source 'pytorch-histc-cpu'): if PyTorch adds an integer CPU histc,
    # revisit the decision.
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        torch.histc(torch.arange(8), bins=4)
    assert torch.histc(torch.arange(8.0), bins=4).tolist() == [2.0, 2.0, 2.0, 2.0]


def test_grouped_mm_alignment_is_a_known_issue_raising_value_error():
    prof = profiles.load("trn2")
    issue = prof.kernel_failures["aten::_grouped_mm"]
    assert issue.precondition == "grouped_mm_128_alignment_bf16" and issue.error == "ValueError"
    assert not issue.cpu_retry and "grouped_mm.py" in issue.source and issue.confidence == "medium"
    check = policy.PRECONDITIONS[issue.precondition]
    bf = torch.bfloat16
    # bf16 only: real Trn2 (torch-neuronx 2.12.3) has no fp32 path (A's DeepSeek-V4 runlog).
    assert check((torch.ones(256, 8), torch.ones(2, 8, 4), torch.tensor([128, 256], dtype=torch.int32)), {})
    a, b3 = torch.ones(256, 8, dtype=bf), torch.ones(2, 8, 4, dtype=bf)
    assert not check((a, b3, torch.tensor([128, 256], dtype=torch.int32)), {})  # 2D x 3D, aligned
    assert check((a, b3, torch.tensor([100, 256], dtype=torch.int32)), {})  # offs not a multiple of 128
    assert check((torch.ones(200, 8, dtype=bf), b3, torch.tensor([128, 200], dtype=torch.int32)), {})  # t % 128
    assert check((a, b3, torch.tensor([256, 128], dtype=torch.int32)), {})  # unsorted
    assert not check((torch.ones(2, 4, 8), b3, torch.tensor([1, 2])), {})  # 3D x 3D: no Neuron impl, no failure
    assert issubclass(policy.NeuronKernelValueError, ValueError)


def test_known_issue_is_decided_then_checked_per_call(monkeypatch):
    gmm, bf16, i32 = torch.ops.aten._grouped_mm.default, torch.bfloat16, torch.int32
    assert policy.decide(gmm, [bf16, bf16, i32]) == policy.KERNEL_FAIL  # cache-safe: "check each call"
    a, b = torch.ones(256, 8, dtype=bf16), torch.ones(2, 8, 4, dtype=bf16)
    bad, good = torch.tensor([100, 256], dtype=i32), torch.tensor([128, 256], dtype=i32)
    issue = policy.kernel_failure(gmm, [bf16, bf16, i32], (a, b, bad))
    assert issue is not None and issue.op == "aten::_grouped_mm"
    assert policy.kernel_failure(gmm, [bf16, bf16, i32], (a, b, good)) is None
    err = policy.error_for(gmm, [bf16, bf16, i32], [(256, 8), (2, 8, 4), (2,)])
    assert isinstance(err, ValueError) and err.op == "aten::_grouped_mm" and "128" in err.reason
    monkeypatch.setattr(policy.CONFIG, "skip_op_preconditions", True, raising=False)  # the source's opt-out
    assert policy.kernel_failure(gmm, [bf16, bf16, i32], (a, b, bad)) is None


def test_unknown_profile_is_one_line_listing_the_valid_ones():
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load("torchneuron")
    msg = str(info.value)
    assert "\n" not in msg and "'torchneuron'" in msg and "legacy-xla, trn2, trn3" in msg


def _broken(tmp_path: Path, edit) -> Path:
    raw = json.loads((profiles.PROFILE_DIR / "trn2.json").read_text())
    edit(raw)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(raw))
    return path


def test_profile_with_unknown_op_fails_at_load_naming_the_entry(tmp_path):
    def edit(raw):
        raw["ops"]["aten::not_an_op"] = {"class": "native", "dtypes": "all", "source": "src-registrations"}
    with pytest.raises(profiles.ProfileError, match=r"broken\.json: ops\['aten::not_an_op'\]: unknown op name"):
        profiles.parse_file(_broken(tmp_path, edit))


def test_profile_with_missing_source_fails_at_load_naming_the_entry(tmp_path):
    def edit(raw):
        raw["ops"]["aten::add"]["source"] = "nowhere"
    with pytest.raises(profiles.ProfileError, match=r"ops\['aten::add'\]: missing source 'nowhere'"):
        profiles.parse_file(_broken(tmp_path, edit))

    def drop_ref(raw):
        del raw["known_issues"][0]["source"]
    with pytest.raises(profiles.ProfileError, match=r"known_issues\[0\] \(aten::_grouped_mm\): missing source"):
        profiles.parse_file(_broken(tmp_path, drop_ref))


@pytest.mark.skipif(not (MIRROR / "HEAD").exists() and not (MIRROR / ".git").exists(),
                    reason="torch-neuronx source mirror not on this machine")
def test_source_snapshot_matches_the_mirror():
    shipped = json.loads((build.HERE / "torch_neuronx_source.json").read_text())
    assert extract.extract(str(MIRROR)) == shipped
