"""Transformers' own tensor parallelism on ``neuron``: ``from_pretrained(..., distributed_config=
DistributedConfig(tp_plan="auto"))`` on two ranks with torchrun's variables, against the whole model on the CPU.

Transformers 5.23 chooses the process-group backend from the device type (transformers/distributed/utils.py,
``DISTRIBUTED_BACKEND_MAP["neuron"] = "neuron"``) and creates the group itself; this shows that path works here.
"""

from __future__ import annotations

import torch
from rank_programs import LLAMA_DIR, llama_input_ids
from transformers import LlamaForCausalLM
from two_ranks import facet, shared_run

# fp32 with exact device matmuls: the row-parallel projections (o_proj, down_proj) add two partial products with an
# all-reduce where the CPU adds one full product, a few float32 ulps on logits of order 1: 1e-5 absolute and relative.
RTOL, ATOL = 1e-5, 1e-5


def test_tp_plan_auto_shards_the_model_over_the_neuron_group():
    for rank, res in enumerate(facet(shared_run(), "hf_tp")):
        assert res["backend"] == "neuron"  # picked by Transformers for the device, not passed by the test
        kind, device, placements, local_shape = res["weight"]
        assert (kind, device, placements) == ("DTensor", f"neuron:{rank}", "(Shard(dim=0),)")
        assert local_shape == (32, 64)  # q_proj is column-parallel: half of its 64 output rows per rank


def test_tp_plan_auto_logits_match_the_cpu_model():
    run = shared_run()
    model = LlamaForCausalLM.from_pretrained(run.out_dir / LLAMA_DIR).eval()
    with torch.no_grad():
        expected = model(llama_input_ids()).logits
    for res in facet(run, "hf_tp"):
        torch.testing.assert_close(res["logits"], expected, rtol=RTOL, atol=ATOL)
    assert [r["fallback_ops"]["hf_tp"] for r in run.results] == [[], []]
