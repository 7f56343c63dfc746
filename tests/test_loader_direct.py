"""The converted-model fast path (`load_state_direct`) must give the very model `from_pretrained` gives:
same tensors, dtypes, buffers, tied weights and logits; and refuse (None) a folder it cannot fully load."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


def _save(model, folder):
    """A folder as the GGUF conversion writes it (`sgcli.engine.gguf_convert._convert_into`)."""
    from safetensors.torch import save_model

    folder.mkdir(parents=True, exist_ok=True)
    save_model(model, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(model.config.to_dict()))
    model.generation_config.save_pretrained(str(folder))
    return folder


def _random_llama(tied: bool):
    from helpers import random_llama

    return random_llama(300, tied=tied, initializer_range=0.3, eos_token_id=5).model


def _same_model(a, b) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key].dtype == sb[key].dtype and torch.equal(sa[key], sb[key]), key
    assert [(n, x.dtype) for n, x in a.named_buffers()] == [(n, x.dtype) for n, x in b.named_buffers()]
    ids = torch.tensor([[1, 17, 250, 3, 99, 42]])
    with torch.no_grad():
        assert torch.equal(a(ids).logits, b(ids).logits)
    assert not b.training
    assert a.generation_config.eos_token_id == b.generation_config.eos_token_id == 5


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_direct_load_is_the_model_from_pretrained_gives(tmp_path, tied, dtype):
    from transformers import AutoModelForCausalLM

    from sgcli.engine.loader import load_state_direct

    folder = _save(_random_llama(tied), tmp_path / "model")
    torch_dtype = getattr(torch, dtype)
    direct = load_state_direct(folder, torch_dtype)
    assert direct is not None
    _same_model(AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype).eval(), direct)
    if tied:
        assert direct.lm_head.weight.data_ptr() == direct.model.embed_tokens.weight.data_ptr()


def test_a_file_with_other_key_names_falls_back(tmp_path):
    from safetensors.torch import load_file, save_file

    from sgcli.engine.loader import load_state_direct

    folder = _save(_random_llama(False), tmp_path / "model")
    state = load_file(str(folder / "model.safetensors"))
    state["model.layers.0.old_name.weight"] = state.pop("model.layers.0.mlp.up_proj.weight")
    save_file(state, str(folder / "model.safetensors"))
    assert load_state_direct(folder, torch.float32) is None


def test_a_file_missing_a_weight_falls_back(tmp_path):
    from safetensors.torch import load_file, save_file

    from sgcli.engine.loader import load_state_direct

    folder = _save(_random_llama(False), tmp_path / "model")
    state = load_file(str(folder / "model.safetensors"))
    del state["model.norm.weight"]
    save_file(state, str(folder / "model.safetensors"))
    assert load_state_direct(folder, torch.float32) is None


def test_a_transformers_without_no_init_weights_falls_back(tmp_path, monkeypatch):
    """pyproject allows transformers 4.x, where the context lives elsewhere (or nowhere): that is a
    reason to use from_pretrained, never a "damaged conversion" to throw away."""
    from sgcli.engine import loader

    assert loader._no_init_weights() is not None  # found in the installed release
    folder = _save(_random_llama(True), tmp_path / "model")
    monkeypatch.setattr(loader, "_no_init_weights", lambda: None)
    assert loader.load_state_direct(folder, torch.float32) is None


@pytest.mark.model
def test_default_model_loads_through_its_recipe_as_transformers_loads_the_gguf():
    """The default GGUF's recipe rebuilds, bit for bit, the float32 weights transformers reads from it
    (what the conversion cached before recipes); both forwards built on them give the same logits and
    greedy tokens as before: transformers' exactly, the native one as from a float32 folder."""
    from transformers import AutoModelForCausalLM

    from sgcli.engine import llama
    from sgcli.engine.gguf_convert import convert_gguf
    from sgcli.engine.gguf_recipe import load_state
    from sgcli.engine.loader import load_state_direct
    from sgcli.models.refs import resolve_model

    gguf = resolve_model(None).path
    folder = convert_gguf(gguf)
    weights = load_state(folder, gguf)
    reference = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    expected = reference.state_dict()
    assert list(weights) == list(expected)
    assert all(torch.equal(weights[k].view(torch.int32), expected[k].view(torch.int32)) for k in expected)
    direct = load_state_direct(folder, torch.float32, weights)
    assert direct.lm_head.weight.data_ptr() == direct.model.embed_tokens.weight.data_ptr()
    ids = torch.tensor([[1, 504, 3458, 314, 2114, 28, 905]])
    with torch.no_grad():
        assert torch.equal(reference(ids).logits, direct(ids).logits)
        greedy = reference.generate(ids, max_new_tokens=8, do_sample=False)
        assert torch.equal(direct.generate(ids, max_new_tokens=8, do_sample=False), greedy)
    config = json.loads((folder / "config.json").read_text())
    native = llama.load(folder, config, torch.float32, weights)
    before = llama.load(folder, config, torch.float32, {k: v.clone() for k, v in expected.items()})  # float32 copy
    with torch.no_grad():
        assert torch.equal(native(input_ids=ids).logits, before(input_ids=ids).logits)
