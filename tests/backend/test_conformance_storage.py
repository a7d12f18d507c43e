"""Conformance, facet in-place metadata changes: ``set_``, ``resize_``, in-place views, and ``out=`` that resizes.
The wrapper's shape/strides must follow its host data (they are fixed at creation otherwise).
"""

from __future__ import annotations

import torch


def test_set_takes_the_source_shape_and_values(dev):
    a = torch.arange(6.0).to(dev)
    b = torch.arange(4.0).reshape(2, 2).to(dev) + 10
    a.set_(b)
    assert a.shape == (2, 2) and a.cpu().tolist() == [[10.0, 11.0], [12.0, 13.0]]
    a.add_(1)  # shares b's storage, as set_ does on any device
    assert b.cpu().tolist() == [[11.0, 12.0], [13.0, 14.0]]


def test_resize_shrinks_and_grows(dev):
    a = torch.arange(6.0).to(dev)
    a.resize_(2, 2)
    assert a.shape == (2, 2) and a.cpu().tolist() == [[0.0, 1.0], [2.0, 3.0]]
    a.resize_(10)
    assert a.shape == (10,) and a.cpu()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    b = torch.empty(0).to(dev).resize_as_(torch.ones(3, 2).to(dev))
    assert b.shape == (3, 2)


def test_in_place_views_change_shape_and_strides(dev):
    a = torch.arange(6.0).reshape(2, 3).to(dev)
    a.t_()
    ref = torch.arange(6.0).reshape(2, 3).t()
    assert a.shape == ref.shape and a.stride() == ref.stride() and torch.equal(a.cpu(), ref)
    a.unsqueeze_(0)
    assert a.shape == (1, 3, 2)


def test_out_argument_is_resized(dev):
    out = torch.empty(0).to(dev)
    torch.add(torch.ones(3).to(dev), 1, out=out)
    assert out.shape == (3,) and out.cpu().tolist() == [2.0, 2.0, 2.0]
