"""Conformance, facet printing and host reads: ``__format__``, ``__repr__``, ``.tolist()``, and ``.numpy()``'s error."""

from __future__ import annotations

import pytest
import torch


def test_format_of_a_zero_dim_tensor_formats_its_value(dev):
    # Issue 11 point 7: format(t, ".3e") raised TypeError (torch formats 0-d tensors only when type(t) is Tensor).
    t = torch.tensor(3.14159).to(dev)
    assert format(t, ".3e") == "3.142e+00" and f"{t:.2f}" == "3.14"
    assert f"{torch.tensor(7).to(dev):03d}" == "007"


def test_format_of_a_tensor_with_dims_behaves_like_torch(dev):
    t = torch.ones(2)
    assert format(t.to(dev), "") == str(t.to(dev))
    with pytest.raises(TypeError):
        format(t, ".3e")  # torch's own behaviour on CPU
    with pytest.raises(TypeError):
        format(t.to(dev), ".3e")


def test_repr_names_device_dtype_and_autograd_like_torch(dev):
    assert repr(torch.tensor([1.0, 2.0]).to(dev)) == "tensor([1., 2.], device='neuron:0')"
    assert repr(torch.tensor([1.0], dtype=torch.float16).to(dev)) == (
        "tensor([1.], device='neuron:0', dtype=torch.float16)")
    x = torch.ones(2, requires_grad=True)
    assert repr(x.to(dev)) == "tensor([1., 1.], device='neuron:0', grad_fn=<ToCopyBackward0>)"
    p = torch.nn.Parameter(torch.zeros(1).to(dev))
    assert repr(p) == "Parameter containing:\ntensor([0.], device='neuron:0', requires_grad=True)"


def test_tolist_and_item_read_the_host_values(dev):
    t = torch.tensor([[1, 2], [3, 4]]).to(dev)
    assert t.tolist() == [[1, 2], [3, 4]] and t[1, 0].item() == 3


def test_numpy_refuses_like_cuda(dev):
    # PyTorch's own message names the device as for CUDA ("can't convert cuda:0 device type tensor to numpy",
    # torch/csrc/utils/tensor_numpy.cpp): the device index is part of it.
    with pytest.raises(TypeError, match="can't convert neuron:0 device type tensor to numpy"):
        torch.ones(2).to(dev).numpy()
    assert torch.ones(2).to(dev).cpu().numpy().tolist() == [1.0, 1.0]
