"""Conformance, facet generation through Transformers' real code paths: sampling (aten::multinomial falls back to the
CPU by default), beam search and assisted decoding, each equal to the CPU under exact (fp32) numerics.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import neuron_backend

VOCAB = 64


def _tiny(layers: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
                      eos_token_id=1, bos_token_id=2)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def pair():
    cpu = _tiny()
    dev = _tiny()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to("neuron")


def _ids():
    torch.manual_seed(1)
    return torch.randint(3, VOCAB, (2, 6))


def _both(pair, **kw):
    cpu, dev = pair
    ids = _ids()
    mask = torch.ones_like(ids)
    torch.manual_seed(7)
    ref = cpu.generate(ids, attention_mask=mask, pad_token_id=0, **kw)
    torch.manual_seed(7)  # device draws come from the host generator: same seed, same draws
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = dev.generate(ids.to("neuron"), attention_mask=mask.to("neuron"), pad_token_id=0, **kw)
    return got.cpu(), ref


def test_sampling_generate_runs_by_default_and_matches_the_cpu(dev, pair, exact_numerics):
    neuron_backend.clear_op_tracking()
    got, ref = _both(pair, do_sample=True, top_k=10, max_new_tokens=5)
    assert torch.equal(got, ref)
    assert "aten::multinomial" in neuron_backend.get_fallback_ops()


def test_sampling_generate_under_strict_names_its_op(dev, pair):
    neuron_backend.set_strict(True)
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError) as info:
        _both(pair, do_sample=True, max_new_tokens=2)
    # The first op of sampling the profile puts on the CPU stops it (isin, from the stopping criteria, precedes
    # multinomial on trn2); whichever it is, strict names it and the profile classifies it cpu_fallback.
    op = neuron_backend.unwrap_error(info.value).op
    assert neuron_backend.policy.active().classification(op) == "cpu_fallback", op
    with pytest.raises(neuron_backend.NeuronUnsupportedOpError) as info:
        torch.multinomial(torch.ones(2, 4, device="neuron"), 1)
    assert neuron_backend.unwrap_error(info.value).op == "aten::multinomial"


def test_beam_search_matches_the_cpu(dev, pair, exact_numerics):
    got, ref = _both(pair, num_beams=3, do_sample=False, max_new_tokens=4)
    assert torch.equal(got, ref)


def test_assisted_decoding_matches_greedy(dev, pair, exact_numerics):
    cpu, model = pair
    assistant = _tiny(layers=1).to("neuron")
    ids = _ids()[:1]  # assisted generation takes a batch of one
    kw = dict(do_sample=False, max_new_tokens=5, pad_token_id=0)
    greedy = cpu.generate(ids, attention_mask=torch.ones_like(ids), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = model.generate(ids.to("neuron"), attention_mask=torch.ones_like(ids).to("neuron"),
                             assistant_model=assistant, **kw)
    assert torch.equal(got.cpu(), greedy)  # assisted decoding is exact: it only changes how tokens are proposed
