"""Configs of the native families that one forward or both mishandled (a held-out tour, 2026-12-07).

Why: each runtime must either compute a config as transformers' uncached forward does or refuse
it at load with exit 2 naming the config's keys; a crash deep in a forward reads as a bug in sgcli
(exit 3), and two runtimes that silently disagree give different records for one model. Tiny
random checkpoints built from transformers' config classes, edited where a config.json is.
"""

from __future__ import annotations

import json

import pytest
import torch
from test_native_families import SHAPE as NATIVE_SHAPE

from sgcli.engine import families, loader
from sgcli.engine.loader import load_model
from sgcli.engine.runtime import TransformersRuntime
from sgcli.errors import UserError
from sgcli.models.refs import resolve_model

# the native-family tests' tiny shape, one layer less (sliding, full, sliding) and sharper weights
SHAPE = NATIVE_SHAPE | dict(num_hidden_layers=3, initializer_range=0.2, max_position_embeddings=64)
IDS = torch.tensor([[(i * 37 + 5) % 250 for i in range(24)]])
_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]


def _model(cls: str, **kw):
    """transformers' model of that config class with random weights, norms and biases moved off
    their initial values so each counts."""
    import transformers
    from transformers import AutoModelForCausalLM

    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_config(getattr(transformers, cls)(**{**SHAPE, **kw}), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.3)
    return model.eval()


def _saved(folder, cls: str, edit: dict | None = None, **kw):
    """The model saved as a checkpoint, `edit` then written into its config.json."""
    model = _model(cls, **kw)
    model.save_pretrained(folder)
    if edit:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **edit}))
    return model


def _no_weights(monkeypatch):
    """Loading weights fails the test: a refusal must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded before the config was refused")

    monkeypatch.setattr(loader, "_load_native", refuse)
    monkeypatch.setattr(loader, "_from_pretrained", refuse)


@pytest.mark.parametrize("impl", ["auto", "native", "transformers"])
def test_key_value_heads_that_do_not_divide_the_heads_are_refused_at_load(tmp_path, monkeypatch, impl):
    """4 query heads, 3 key heads: no forward can group them (the native one and transformers' both
    failed in attention: exit 3). Exit 2 naming the config and both keys, before any weights load."""
    _saved(tmp_path, "LlamaConfig", num_key_value_heads=3)
    _no_weights(monkeypatch)
    with pytest.raises(UserError) as refused:
        load_model(resolve_model(str(tmp_path)), device="cpu", impl=impl)
    message = str(refused.value)
    assert str(tmp_path / "config.json") in message
    assert "num_key_value_heads (3) does not divide num_attention_heads (4)" in message


CANNOT_RUN = {
    # Qwen2's sliding mask raises without a window: `use_sliding_window` false unsets it
    "qwen2-types-without-window": (
        "Qwen2Config",
        {"use_sliding_window": False, "sliding_window": 4},
        {"layer_types": _TYPES},
        "sliding layers without a sliding_window (layer_types lists them; use_sliding_window is false)",
    ),
    # transformers computes linear frequencies for half the head, then rotates all of it
    "llama-partial-linear": (
        "LlamaConfig",
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}},
        {"partial_rotary_factor": 0.5},
        "partial_rotary_factor 0.5 with linear rope scaling",
    ),
}


@pytest.mark.parametrize("impl", ["auto", "native", "transformers"])
@pytest.mark.parametrize("case", CANNOT_RUN)
def test_configs_transformers_cannot_run_either_are_refused_not_crashed(tmp_path, monkeypatch, case, impl):
    """auto used to hand these to transformers, whose forward then raised (exit 3)."""
    cls, kw, edit, reason = CANNOT_RUN[case]
    model = _saved(tmp_path, cls, edit, **kw)
    with pytest.raises((ValueError, RuntimeError)):  # transformers' own forward fails on it: nothing sgcli could run
        type(model).from_pretrained(tmp_path)(input_ids=IDS, use_cache=False)
    _no_weights(monkeypatch)
    with pytest.raises(UserError) as refused:
        load_model(resolve_model(str(tmp_path)), device="cpu", impl=impl)
    assert str(tmp_path / "config.json") in str(refused.value) and reason in str(refused.value)


def test_a_transformers_model_that_fails_its_probe_pass_is_a_user_error():
    """A model transformers cannot run that reached the runtime another way (a hub download not yet
    in the local cache): its first pass, the output head's probe, is exit 2 and not a traceback."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**SHAPE, use_sliding_window=False, sliding_window=4)
    config.layer_types = _TYPES
    runtime = TransformersRuntime(AutoModelForCausalLM.from_config(config).eval())
    with pytest.raises(UserError, match="cannot run this model's config: ValueError"):
        runtime.head()


SLIDING = {
    # Llama's attention ignores a window; transformers' cache built from the config did not
    "llama-with-window-key": ("LlamaConfig", {}, {"sliding_window": 4, "use_sliding_window": True}),
    # a window of 1: the config's cache kept every key while its mask counted none
    "mistral-window-1": ("MistralConfig", {"sliding_window": 1}, None),
    "mistral-window-4": ("MistralConfig", {"sliding_window": 4}, None),
    "qwen2-sliding": ("Qwen2Config", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}, None),
    "gemma2": ("Gemma2Config", {"head_dim": 16, "sliding_window": 4}, None),
    "gemma3": ("Gemma3TextConfig", {"head_dim": 16, "sliding_window": 4, "layer_types": _TYPES}, None),
}


@pytest.mark.parametrize("case", SLIDING)
def test_transformers_cached_decoding_is_its_own_uncached_forward(tmp_path, case):
    """A prefill of 10 tokens then single steps past the window, on the transformers runtime's own
    cache, against one uncached pass: the Llama and window-1 cases differed by up to 12 in the
    logits (the native runtime gave the uncached numbers: the two disagreed silently)."""
    from transformers import AutoModelForCausalLM

    cls, kw, edit = SLIDING[case]
    _saved(tmp_path, cls, edit, **kw)
    runtime = TransformersRuntime(AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval())
    with torch.inference_mode():
        whole = runtime.module(input_ids=IDS, use_cache=False).logits[0]
        cache, steps = runtime.new_cache(), []
        for feed in [IDS[:, :10]] + [IDS[:, t : t + 1] for t in range(10, IDS.shape[1])]:
            logits, cache = runtime.logits(feed, cache, 1)
            steps.append(logits[0, -1])
        cached = torch.stack(steps)
    assert torch.allclose(cached, whole[9:], atol=1e-4), (cached - whole[9:]).abs().max()


def test_a_llama_config_with_a_window_gives_the_same_numbers_on_both_runtimes(tmp_path):
    """The record's model_impl no longer changes the output of such a model."""
    _saved(tmp_path, "LlamaConfig", {"sliding_window": 4, "use_sliding_window": True})
    ref = resolve_model(str(tmp_path))
    native, theirs = (
        load_model(ref, device="cpu", dtype="float32", impl=i).runtime for i in ("native", "transformers")
    )
    with torch.inference_mode():
        got = []
        for runtime in (native, theirs):
            cache, steps = runtime.new_cache(), []
            for feed in [IDS[:, :10]] + [IDS[:, t : t + 1] for t in range(10, IDS.shape[1])]:
                hidden, cache = runtime.hidden(feed, cache)
                steps.append(runtime.head().logits(hidden[:, -1])[0])
            got.append(torch.stack(steps))
    assert torch.allclose(got[0], got[1], atol=1e-4), (got[0] - got[1]).abs().max()


@pytest.mark.parametrize("cls, kw", [("LlamaConfig", {}), ("Qwen3Config", {"head_dim": 16})])
def test_a_partial_rotary_factor_with_the_default_rope_runs_natively(tmp_path, cls, kw):
    """These families' default rotary embedding ignores `partial_rotary_factor` (transformers' logits
    with and without it are equal); the native forward refused it, now computes the same logits."""
    from transformers import AutoModelForCausalLM

    _saved(tmp_path, cls, {"partial_rotary_factor": 0.5}, **kw)
    config = json.loads((tmp_path / "config.json").read_text())
    assert families.misfit(config) is None
    native = load_model(resolve_model(str(tmp_path)), device="cpu", dtype="float32", impl="auto")
    assert native.impl == "native"
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    with torch.inference_mode():
        hidden, _ = native.runtime.hidden(IDS, None, use_cache=False)
        got = native.runtime.head().logits(hidden)[0]
        want = theirs(input_ids=IDS, use_cache=False).logits[0]
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_what_neither_forward_runs_is_told_apart_from_what_only_the_native_one_does_not():
    """`unrunnable` names the keys; a Gemma 3 partial rotation with a scaling runs on transformers,
    so it stays a plain misfit (auto runs transformers); any model type's heads are checked."""
    llama = {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64}
    assert families.unrunnable(llama) is None
    assert "num_key_value_heads (3)" in families.unrunnable({**llama, "num_key_value_heads": 3})
    assert "num_key_value_heads (3)" in families.unrunnable({**llama, "model_type": "phi3", "num_key_value_heads": 3})
    assert families.unrunnable({**llama, "model_type": "phi3", "partial_rotary_factor": 0.5}) is None
    gemma3 = {"model_type": "gemma3_text", "head_dim": 16, "partial_rotary_factor": 0.5}
    gemma3["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 2.0}, "sliding_attention": None}
    assert families.unrunnable(gemma3) is None
    assert families.misfit(gemma3) == "it uses a partial rotary embedding"


def test_a_transformers_longrope_model_is_not_batched():
    """transformers' LongRoPE takes a batch's longest position for every row: batched rows differed
    from the same rows alone (6 of 8, no warning). Such a model now decodes one request at a time,
    with the notice batching gives; other rope kinds still batch."""
    long = {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 12}
    long |= {"short_factor": [1.0] * 8, "long_factor": [2.0 + i for i in range(8)]}
    assert "longrope" in TransformersRuntime(_model("LlamaConfig", rope_parameters=long)).supports.splice
    assert TransformersRuntime(_model("LlamaConfig")).supports.splice is None
