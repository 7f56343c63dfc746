"""The GGUF recipe (`sgcli.engine.gguf_recipe`): a tiny Llama GGUF written here with gguf-py's
GGUFWriter (several quant types, one that sgcli does not dequantize) is converted once; the weights
the recipe rebuilds from the file are bit for bit transformers' own float32 load, and the models
sgcli builds from them give transformers' logits."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

Q = gguf.GGMLQuantizationType
HIDDEN, FFN, HEADS, KV_HEADS, LAYERS, VOCAB = 256, 512, 4, 2, 2, 300


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _blocks(rng, qtype, shape) -> np.ndarray:
    """Random bytes for a K-quant tensor (gguf-py cannot quantize those), with sane float16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = shape
    data = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
    scales = (rng.random((data.shape[0], 2)) * 0.01).astype(np.float16).view(np.uint8)
    at = {Q.Q4_K: 0, Q.Q6_K: 208, Q.Q3_K: 108, Q.IQ2_XXS: 0}[qtype]  # d (and dmin for Q4_K), per ggml-common.h
    width = 4 if qtype == Q.Q4_K else 2
    data[:, at : at + width] = scales[:, :width]
    return data.reshape(rows, cols // block * size)


def write_tiny_gguf(path, seed: int = 0):
    """A 2-layer Llama GGUF: F32 norms, a Q8_0 embedding, Q3_K / Q4_K / Q6_K / Q4_1 / Q5_0 / F16 /
    BF16 matrices, and one IQ2_XXS matrix (not one sgcli dequantizes: stored as float32)."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(VOCAB)

    def add(name, shape, qtype):
        values = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        if qtype == Q.F32:
            writer.add_tensor(name, values + 1 if len(shape) == 1 else values)
        elif qtype == Q.F16:
            writer.add_tensor(name, values.astype(np.float16))
        elif qtype in (Q.Q4_K, Q.Q6_K, Q.Q3_K, Q.IQ2_XXS):
            writer.add_tensor(name, _blocks(rng, qtype, shape), raw_dtype=qtype)
        else:
            writer.add_tensor(name, gguf.quantize(values, qtype), raw_dtype=qtype)

    add("token_embd.weight", (VOCAB, HIDDEN), Q.Q8_0)
    kinds = [Q.Q4_K, Q.Q6_K, Q.Q4_1, Q.Q5_0, Q.F16, Q.BF16, Q.Q5_1]
    for i in range(LAYERS):
        k = kinds[i:] + kinds[:i]
        add(f"blk.{i}.attn_norm.weight", (HIDDEN,), Q.F32)
        add(f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), k[0])
        add(f"blk.{i}.attn_k.weight", (HIDDEN // HEADS * KV_HEADS, HIDDEN), k[1])
        add(f"blk.{i}.attn_v.weight", (HIDDEN // HEADS * KV_HEADS, HIDDEN), k[2])
        add(f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN), {0: Q.Q3_K, 1: Q.IQ2_XXS}.get(i, k[3]))
        add(f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), k[4])
        add(f"blk.{i}.ffn_up.weight", (FFN, HIDDEN), k[5])
        add(f"blk.{i}.ffn_down.weight", (HIDDEN, FFN), k[6])
        add(f"blk.{i}.ffn_norm.weight", (HIDDEN,), Q.F32)
    add("output_norm.weight", (HIDDEN,), Q.F32)
    add("output.weight", (VOCAB, HIDDEN), Q.Q6_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _reference(path):
    """transformers' own float32 load of the GGUF (what the conversion used to save)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def _same_bits(a, b) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    path = write_tiny_gguf(folder / "tiny.gguf")
    return path, _reference(path)


def test_the_recipe_rebuilds_transformers_weights_bit_for_bit(tiny):
    from sgcli.engine import gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf

    path, reference = tiny
    folder = convert_gguf(path)
    recipe = json.loads((folder / gguf_recipe.RECIPE).read_text())
    steps = recipe["steps"]
    assert steps["model.layers.0.self_attn.q_proj.weight"]["transform"] == f"reverse_permute:{HEADS}"
    assert steps["model.layers.1.self_attn.k_proj.weight"]["transform"] == f"reverse_permute:{KV_HEADS}"
    assert steps["model.layers.0.mlp.up_proj.weight"]["transform"] == "identity"
    assert recipe["stored"] == ["model.layers.1.self_attn.o_proj.weight"]  # IQ2_XXS: float32 in the folder
    used = {recipe["tensors"][s["tensor"]]["type"] for s in steps.values()}
    assert used == {int(t) for t in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q3_K, Q.Q4_K, Q.Q6_K)}
    state = gguf_recipe.load_state(folder, path)
    expected = reference.state_dict()
    assert list(state) == list(expected)
    for name, tensor in expected.items():
        assert _same_bits(state[name], tensor), name
    assert (folder / gguf_recipe.STORED).stat().st_size < 2 * HIDDEN * HIDDEN * 4


def test_a_fix_up_the_recipe_does_not_know_is_stored_as_float32(tmp_path, monkeypatch):
    """transformers doing something to a tensor that no candidate reproduces (here: doubling the
    final norm): that parameter is stored as transformers made it, and the load is still exact."""
    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    from sgcli.engine import gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf

    path = write_tiny_gguf(tmp_path / "odd.gguf", seed=1)
    original = hf_gguf.LlamaTensorProcessor.process

    def process(self, weights, name, **kwargs):
        result = original(self, weights, name, **kwargs)
        return result._replace(weights=result.weights * 2) if name == "output_norm.weight" else result

    monkeypatch.setattr(hf_gguf.LlamaTensorProcessor, "process", process)
    folder = convert_gguf(path)
    reference = _reference(path)
    recipe = json.loads((folder / gguf_recipe.RECIPE).read_text())
    assert recipe["stored"] == ["model.layers.1.self_attn.o_proj.weight", "model.norm.weight"]
    state = gguf_recipe.load_state(folder, path)
    assert all(_same_bits(state[name], t) for name, t in reference.state_dict().items())


@pytest.mark.parametrize("impl", ["native", "transformers"])
def test_models_built_from_the_recipe_give_transformers_logits(tiny, impl):
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import ModelRef

    path, reference = tiny
    loaded = load_model(ModelRef("gguf", str(path), path.name), device="cpu", impl=impl, kernel="torch")
    assert loaded.impl == impl
    ids = torch.tensor([[1, 17, 250, 3, 99, 42]])
    with torch.no_grad():
        expected, got = reference(input_ids=ids).logits, loaded.model(input_ids=ids).logits
    if impl == "transformers":
        assert torch.equal(got, expected)
    else:  # another forward pass: the same weights, float32 rounding of its own
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_a_device_map_gets_transformers_own_placed_load_of_the_gguf(tiny):
    """--device-map: transformers builds and places the model, reading the .gguf itself."""
    pytest.importorskip("accelerate")
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import ModelRef

    path, reference = tiny
    loaded = load_model(ModelRef("gguf", str(path), path.name), device_map={"": "cpu"}, kernel="torch")
    assert loaded.impl == "transformers" and loaded.device == "cpu"
    ids = torch.tensor([[1, 17, 250, 3, 99, 42]])
    with torch.no_grad():
        assert torch.equal(loaded.model(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_the_native_forward_fuses_the_recipes_rows_without_a_copy(tiny):
    """q/k/v and gate/up lie one after another in the recipe's buffer: the fused weight is a view."""
    import json as _json

    from sgcli.engine import gguf_recipe, llama
    from sgcli.engine.gguf_convert import convert_gguf

    path, reference = tiny
    folder = convert_gguf(path)
    state = gguf_recipe.load_state(folder, path)
    config = _json.loads((folder / "config.json").read_text())
    model = llama.load(folder, config, torch.float32, state)
    layer = model.model.layers[0]
    assert layer.qkv.weight.data_ptr() == state["model.layers.0.self_attn.q_proj.weight"].data_ptr()
    expected = torch.cat([reference.state_dict()[f"model.layers.0.self_attn.{p}_proj.weight"] for p in "qkv"])
    assert _same_bits(layer.qkv.weight, expected)


def test_a_gguf_whose_weights_are_nan_is_exit_2_naming_the_file(tmp_path):
    """The weights check (`weights_problem`) still runs on what the recipe builds: NaN bytes in the
    .gguf itself survive a fresh conversion, so the user is told the file may be damaged."""
    from sgcli.engine.loader import load_model
    from sgcli.errors import UserError
    from sgcli.models.refs import ModelRef
    from sgcli.tokenizers.gguf_meta import read_tensor_index

    path = write_tiny_gguf(tmp_path / "nan.gguf", seed=2)
    norm = next(t for t in read_tensor_index(path) if t.name == "blk.0.ffn_norm.weight")
    data = bytearray(path.read_bytes())
    data[norm.offset : norm.offset + 16] = np.full(4, np.nan, dtype=np.float32).tobytes()
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="cannot be used .*NaN.*converting again"):
        with pytest.raises(UserError) as exc:
            load_model(ModelRef("gguf", str(path), path.name), device="cpu", kernel="torch")
    assert "unusable even when freshly converted" in exc.value.message and ".gguf file itself" in exc.value.hint


def test_the_served_folder_gets_float32_weights_made_from_the_recipe(tiny, tmp_path):
    """A server cannot replay a recipe: `hf_export` writes the weights out, as the float32 conversion did."""
    from safetensors.torch import load_file

    from sgcli.engine.gguf_convert import convert_gguf
    from sgcli.engine.hf_export import _write_weights

    path, reference = tiny
    target = tmp_path / "model.safetensors"
    _write_weights(path, convert_gguf(path), target)
    written = load_file(str(target))
    expected = reference.state_dict()
    assert set(written) <= set(expected) and len(written) == len(expected)  # not tied: every weight
    assert all(_same_bits(written[k], expected[k]) for k in written)
    stamp = target.stat().st_mtime_ns
    _write_weights(path, convert_gguf(path), target)
    assert target.stat().st_mtime_ns == stamp  # written once per conversion


def test_an_earlier_float32_conversion_beside_the_recipe_is_removed(tmp_path):
    """The cache keeps one conversion per file: an older sgcli's float32 folder goes, with a notice."""
    from sgcli.cache.paths import converted_dir
    from sgcli.engine.gguf_convert import convert_gguf

    path = write_tiny_gguf(tmp_path / "old.gguf", seed=3)
    old = converted_dir(path) / "model"
    old.mkdir(parents=True)
    (old / "model.safetensors").write_bytes(bytes(1000))
    with pytest.warns(UserWarning, match="float32 weights an earlier sgcli cached"):
        folder = convert_gguf(path)
    assert folder.name == "recipe" and not old.exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["recipe"]
