"""The profile's decision switches: each option cites its source, setting one changes what the device does (and
nothing else), and no profile label claims a release its op table does not come from (issue 18)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import neuron_backend
from neuron_backend.hardware import profiles


@pytest.fixture(autouse=True)
def _defaults():
    yield
    neuron_backend.set_switches({})


def test_every_switch_option_cites_a_source_and_the_default_is_one_of_them():
    prof = profiles.load("trn2")
    assert {sw.id for sw in prof.switches} == {"integer_sort_topk", "grouped_mm_preconditions", "complex_eager",
                                               "argmax_device", "integer_matmul_eager",
                                               "integer_scatter_compute_eager"}
    for sw in prof.switches:
        assert sw.active == sw.default and sw.default in sw.options and len(sw.options) == 2, sw.id
        assert sw.confidence in ("low", "medium") and sw.measure in ("rerun", "traces"), sw.id
        for option in sw.options:
            refs = [prof.sources[k]["ref"] for k in sw.sources(option)]
            assert refs and all(" @ " in r or r.startswith("https://") for r in refs), (sw.id, option, refs)
    assert not profiles.load("legacy-xla").switches  # the historical profile has no decisions of this kind


def test_profile_labels_name_where_the_op_table_comes_from():
    for name in ("trn2", "trn3"):
        prof = profiles.load(name)
        assert "2.13.3" not in prof.summary and "2.14.3" not in prof.summary, prof.summary
        assert "April 2026 pre-release" in prof.summary and "0.1.0" in prof.summary, prof.summary
        assert "0.1.0 pre-release source" in prof.op_table_from and "2.12.3" in prof.op_table_from
    assert "unknown" in profiles.load("trn3").summary  # no Trn3 run is on record


def test_unknown_switches_and_options_fail_naming_the_valid_ones():
    with pytest.raises(profiles.ProfileError, match="valid switches: integer_sort_topk"):
        neuron_backend.set_switches({"argmax": "native"})
    with pytest.raises(profiles.ProfileError, match="options: cpu_fallback, native"):
        neuron_backend.set_switches({"argmax_device": "gpu"})
    with pytest.raises(profiles.ProfileError, match="not ID=OPTION"):
        profiles.parse_switches("argmax_device")
    assert profiles.parse_switches(" b=x, a=y ,") == (("a", "y"), ("b", "x"))


def test_argmax_switch_moves_argmax_between_the_cpu_fallback_and_the_device(dev):
    x = torch.tensor([[1.0, 3.0, 2.0]], device=dev)
    neuron_backend.reset_fallback_ops()
    assert x.argmax(-1).cpu().tolist() == [1]
    assert neuron_backend.fallback_ops() == ["aten::argmax (Float)"]
    neuron_backend.set_switches({"argmax_device": "native"})
    neuron_backend.reset_fallback_ops()
    assert x.argmax(-1).cpu().tolist() == [1]
    assert neuron_backend.fallback_ops() == []
    assert neuron_backend.device_info()["switches"]["argmax_device"] == "native"


@pytest.mark.parametrize("name", ["trn2", "trn3"])
def test_a_permissive_re_run_switch_only_lets_its_own_ops_run(name):
    # The contract compat.decision_work prunes by: a permissive option drops known issues of, or moves to the CPU
    # fallback, ops of the switch's own names, and changes nothing else; so an architecture refused at another op
    # keeps that refusal under it. A new patch kind here must revisit that rule.
    for sw in profiles.load(name).switches:
        if sw.measure != "rerun" or sw.other_option != "permissive":
            continue
        patch = sw.options[next(o for o in sw.options if o != sw.default)].get("patch", {})
        assert set(patch) <= {"drop_known_issues", "drop_ops"}, (sw.id, sorted(patch))
        assert sw.ops and set(patch.get("drop_known_issues", [])) | set(patch.get("drop_ops", [])) <= set(sw.ops), sw.id


def test_integer_sort_fails_by_default_and_runs_under_the_other_option(dev):
    ids = torch.tensor([2, 0, 1], device=dev)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError, match="NCC_EVRF013") as info:
        torch.sort(ids)
    assert info.value.op == "aten::sort"
    assert torch.sort(ids.float()).values.cpu().tolist() == [0.0, 1.0, 2.0]  # floats sort on the device
    neuron_backend.set_switches({"integer_sort_topk": "runs"})
    assert torch.sort(ids).values.cpu().tolist() == [0, 1, 2]


def test_complex_switch_turns_decomposition_into_the_2_11_3_error(dev):
    z = torch.tensor([1 + 2j, 3 - 1j])
    assert torch.equal((z.to(dev) * 2).cpu(), z * 2)  # decomposed (the Neuron 2.33 docs' default for torch 2.13)
    neuron_backend.set_switches({"complex_eager": "raises"})
    with pytest.raises(neuron_backend.NeuronUnsupportedDtypeError, match="not supported natively on Neuron"):
        z.to(dev) * 2


def test_neuron_switches_environment_variable_sets_them_in_a_new_process():
    code = "import neuron_backend as nb; print(nb.device_info()['switches']['grouped_mm_preconditions'])"
    env = {**os.environ, "NEURON_SWITCHES": "grouped_mm_preconditions=not_enforced"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split()[-1] == "not_enforced", done.stderr[-1500:]
    env["NEURON_SWITCHES"] = "grouped_mm_preconditions=maybe"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "options: enforced, not_enforced" in done.stderr
