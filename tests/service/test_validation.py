"""Input validation rules: Hub repo ids, revisions, config size/remote code/parameter limit (meta device)."""

from __future__ import annotations

import pytest

from service.validation import InvalidInput, check_config, parse_config, validate_repo_id, validate_revision

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.mark.parametrize("good", ["gpt2", "meta-llama/Llama-3.2-1B", "a/b", "Qwen/Qwen2.5-0.5B_x", "x" * 96])
def test_valid_repo_ids(good: str) -> None:
    assert validate_repo_id(good) == good


@pytest.mark.parametrize("bad", ["", "a/b/c", "a--b", "a..b", "-a", "a-", ".a/b", "a/b.", "a b", "a/",
                                 "x" * 97, "ns/na\u00efve", "a/b\x00"])
def test_invalid_repo_ids(bad: str) -> None:
    with pytest.raises(InvalidInput) as e:
        validate_repo_id(bad)
    assert e.value.field == "model_id"


@pytest.mark.parametrize("good", ["main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"])
def test_valid_revisions(good: str) -> None:
    assert validate_revision(good) == good


@pytest.mark.parametrize("bad", ["", "../x", "a..b", "-x", "a//b", "a/", "x.lock", "a b", "a@{1}", "x" * 129])
def test_invalid_revisions(bad: str) -> None:
    with pytest.raises(InvalidInput):
        validate_revision(bad)


def test_parse_config_caps_bytes_and_shape() -> None:
    with pytest.raises(InvalidInput, match="limit is 10"):
        parse_config(b'{"a": "0123456789"}', 10)
    with pytest.raises(InvalidInput, match="JSON object"):
        parse_config(b"[1]", 100)


def test_param_count_is_exact_and_limited() -> None:
    # Llama with tied=False: embed 1000*64 + lm_head 1000*64 + 2 layers of (4*64*64 attn + 3*64*128 mlp + 2*64
    # norms) + final norm 64, counted on the meta device: exact integer arithmetic, no tolerance needed.
    expected = 2 * 1000 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    assert check_config(LLAMA, 10**9) == ("LlamaForCausalLM", expected, [])
    with pytest.raises(InvalidInput) as e:
        check_config({**LLAMA, "vocab_size": 200_000}, expected)
    assert e.value.field == "vocab_size"


@pytest.mark.parametrize(("cfg", "field"), [
    ({**LLAMA, "model_type": "no_such_type"}, "model_type"),
    ({**LLAMA, "architectures": ["os.system"]}, "architectures"),
    ({**LLAMA, "num_hidden_layers": 10**9}, "num_hidden_layers"),
    ({**LLAMA, "hidden_size": -1}, "hidden_size"),  # Transformers' strict int check is not enough: we refuse it
    ({**LLAMA, "num_attention_heads": 5}, "config"),  # 64 not divisible by 5: transformers refuses it
])
def test_config_refusals(cfg: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        check_config(cfg, 10**12)
    assert e.value.field == field
