"""Conformance, facet ``.data``: get and set (including a shape change), views after ``.data`` changes, and
Transformers' resize_token_embeddings, which sets ``param.data`` to a tensor of another shape.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def test_data_get_is_a_detached_alias(dev):
    p = torch.nn.Parameter(torch.arange(4.0).to(dev))
    d = p.data
    assert d.device == dev and not d.requires_grad and d.shape == p.shape
    d.add_(1)  # writes through: .data aliases the parameter
    assert p.detach().cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_data_set_with_a_new_shape_takes_the_new_values(dev):
    # Issue 11 point 7: the wrapper took the new shape but kept reading the old host data (a silent wrong result).
    p = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3).to(dev))
    new = torch.arange(8.0).reshape(4, 2) + 100
    p.data = new.to(dev)
    assert p.shape == (4, 2) and p.requires_grad and isinstance(p, torch.nn.Parameter)
    assert torch.equal(p.detach().cpu(), new)
    assert torch.equal((p * 1).detach().cpu(), new)  # ops read the new data too
    p.data = torch.zeros(3, device=dev)
    assert p.detach().cpu().tolist() == [0.0, 0.0, 0.0]


def test_views_after_a_data_change(dev):
    t = torch.arange(6.0).to(dev)
    old_view = t.view(2, 3)
    t.data = torch.full((3,), 7.0, device=dev)
    # as on any device: a view taken before keeps the old storage; a view taken after sees the new data
    assert old_view.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    new_view = t.view(3, 1)
    new_view.add_(1)
    assert t.cpu().tolist() == [8.0, 8.0, 8.0]


def test_resize_token_embeddings_keeps_the_old_rows_and_matches_the_cpu(dev):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    cpu = LlamaForCausalLM(cfg).eval()
    model = LlamaForCausalLM(cfg).eval()
    model.load_state_dict(cpu.state_dict())
    model.to(dev)
    old = cpu.get_input_embeddings().weight.detach().clone()
    model.resize_token_embeddings(40, mean_resizing=False)
    cpu.resize_token_embeddings(40, mean_resizing=False)
    emb = model.get_input_embeddings().weight
    assert emb.shape == (40, 16) and emb.device == dev
    assert torch.equal(emb.detach().cpu()[:32], old)  # the rows that existed survive the .data swap
    assert model.lm_head.weight.shape == (40, 16)
    assert torch.equal(model.lm_head.weight.detach().cpu()[:32], cpu.lm_head.weight.detach()[:32])
