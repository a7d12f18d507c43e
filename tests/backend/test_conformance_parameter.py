"""Conformance, facet ``Parameter``: construction (and Parameter subclasses) with ``requires_grad``, and Accelerate's
real offload path ``set_module_tensor_to_device``, which rebuilds a parameter as ``type(param)(value, requires_grad=)``.
"""

from __future__ import annotations

import torch
from accelerate.utils import set_module_tensor_to_device


def test_parameter_of_a_device_tensor(dev):
    for flag in (True, False):
        p = torch.nn.Parameter(torch.ones(3).to(dev), requires_grad=flag)
        assert isinstance(p, torch.nn.Parameter) and p.device == dev and p.requires_grad is flag


def test_the_parameter_class_protocol_accepts_requires_grad(dev):
    # Issue 11 point 7: type(param)(value, requires_grad=...) raised TypeError ("unexpected keyword argument").
    p = torch.nn.Parameter(torch.arange(3.0).to(dev))
    cls = type(p)
    q = cls(p.detach(), requires_grad=False)
    assert isinstance(q, torch.nn.Parameter) and q.device == dev and not q.requires_grad
    assert q.cpu().tolist() == [0.0, 1.0, 2.0]
    host = cls(torch.ones(2), requires_grad=True)  # offload: a host value gives a host parameter
    assert type(host) is torch.nn.Parameter and host.device.type == "cpu" and host.requires_grad


def test_parameter_subclass_construction(dev):
    class Tagged(torch.nn.Parameter):
        pass

    t = Tagged(torch.ones(2).to(dev), requires_grad=False)
    # Parameter of a tensor subclass keeps the subclass (torch.nn.Parameter.__new__'s custom-tensor path, as for
    # DTensor): a Parameter, on the device, with the flag; the Python subclass itself is not kept.
    assert isinstance(t, torch.nn.Parameter) and t.device == dev and not t.requires_grad


def test_accelerate_offload_round_trip(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    weight = lin.weight.detach().clone()
    lin.to(dev)
    set_module_tensor_to_device(lin, "weight", "cpu")  # offload
    assert lin.weight.device.type == "cpu" and isinstance(lin.weight, torch.nn.Parameter)
    set_module_tensor_to_device(lin, "weight", dev, value=weight)  # back, with a value
    assert lin.weight.device == dev and lin.weight.requires_grad
    assert torch.equal(lin.weight.detach().cpu(), weight)
    set_module_tensor_to_device(lin, "weight", "meta")
    assert lin.weight.device.type == "meta"
    set_module_tensor_to_device(lin, "weight", dev, value=weight * 2)
    x = torch.randn(2, 4)
    torch.testing.assert_close(lin(x.to(dev)).detach().cpu(), x @ (weight * 2).T + lin.bias.detach().cpu(),
                               rtol=1e-2, atol=1e-2)  # bf16 matmul numerics (compiler default): ~3 digits
