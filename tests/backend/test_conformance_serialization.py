"""Conformance, facet copying and serialization: deepcopy, pickle, torch.save/load.

A device tensor pickles as its host copy, so it loads on the CPU (like map_location="cpu" on a real device, which
would otherwise restore it to the device) and weights_only loading needs no allow-listed class.
"""

from __future__ import annotations

import copy
import pickle

import torch


def test_deepcopy_stays_on_the_device_and_is_independent(dev):
    p = torch.nn.Parameter(torch.arange(3.0).to(dev))
    q = copy.deepcopy(p)
    assert q.device == dev and isinstance(q, torch.nn.Parameter) and q.requires_grad
    with torch.no_grad():
        q.add_(1)
    assert p.detach().cpu().tolist() == [0.0, 1.0, 2.0] and q.detach().cpu().tolist() == [1.0, 2.0, 3.0]
    m = copy.deepcopy(torch.nn.Linear(2, 2).to(dev))
    assert m.weight.device == dev


def test_pickle_round_trip_gives_the_host_values(dev):
    t = torch.arange(4.0).reshape(2, 2).to(dev)
    back = pickle.loads(pickle.dumps(t))
    assert back.device.type == "cpu" and torch.equal(back, t.cpu())


def test_torch_save_load_with_weights_only(dev, tmp_path):
    sd = torch.nn.Linear(3, 2).to(dev).state_dict()
    torch.save(sd, tmp_path / "sd.pt")
    loaded = torch.load(tmp_path / "sd.pt", weights_only=True)
    assert set(loaded) == {"weight", "bias"}
    for k, v in loaded.items():
        assert v.device.type == "cpu" and torch.equal(v, sd[k].cpu())
