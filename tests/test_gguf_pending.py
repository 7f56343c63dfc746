"""A .gguf's weights made in a forked child while the process works on (`sgcli.engine.gguf_pending`):
the same weights as the in-process replay, bit for bit; the child's failures met again in process;
its weight check; a cancelled child stopped and reaped."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

import test_gguf_recipe  # noqa: E402
from test_gguf_recipe import _same_bits, write_tiny_gguf  # noqa: E402

_private_cache, tiny = test_gguf_recipe._private_cache, test_gguf_recipe.tiny  # its fixtures, here too


def test_the_weights_dequantized_in_a_child_are_the_in_process_ones(tiny):
    """`start_weights` dequantizes into shared memory in a forked child while the caller works on:
    the state it hands over is the in-process `load_state`'s, bit for bit, and the model the loader
    builds from it gives the same logits."""
    from sgcli.engine import gguf_pending, gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf
    from sgcli.engine.loader import load_model, start_weights
    from sgcli.models.refs import ModelRef

    path, reference = tiny
    folder = convert_gguf(path)
    ref = ModelRef("gguf", str(path), path.name)
    pending = start_weights(ref)
    assert isinstance(pending, gguf_pending.PendingState) and pending.folder == folder
    state = pending.result()
    expected = gguf_recipe.load_state(folder, path)
    assert list(state) == list(expected)
    assert all(_same_bits(state[k], expected[k]) for k in expected)
    ids = torch.tensor([[1, 5, 9, 200]])
    with torch.inference_mode():
        plain = load_model(ref, device="cpu", kernel="torch").model(ids).logits
        shared = load_model(ref, device="cpu", kernel="torch", pending=start_weights(ref)).model(ids).logits
    assert torch.equal(plain, shared)


def test_nothing_is_started_without_a_cached_recipe_or_with_a_device_map(tmp_path):
    from sgcli.engine.loader import start_weights
    from sgcli.models.refs import ModelRef

    path = write_tiny_gguf(tmp_path / "fresh.gguf", seed=4)
    assert start_weights(ModelRef("gguf", str(path), path.name)) is None  # not converted yet
    assert start_weights(ModelRef("local", str(tmp_path), "folder")) is None
    assert start_weights(ModelRef("gguf", str(path), path.name), device_map="auto") is None


def test_a_child_that_fails_leaves_the_work_to_this_process(tiny, monkeypatch):
    """Whatever stops the child (here an error it alone meets) is not the user's last word: the same
    work runs in process, where a real problem raises as itself (`load_state`'s ValueError)."""
    import os

    from sgcli.engine import gguf_pending, gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf

    path, _ = tiny
    folder = convert_gguf(path)
    parent, real = os.getpid(), gguf_recipe.fill

    def fails_in_the_child(lay, buffer):
        if os.getpid() != parent:
            raise OSError("the child's disk went away")
        real(lay, buffer)

    monkeypatch.setattr(gguf_recipe, "fill", fails_in_the_child)
    state = gguf_pending.PendingState(folder, path).result()
    expected = gguf_recipe.load_state(folder, path)
    assert all(_same_bits(state[k], expected[k]) for k in expected)


def test_a_cancelled_child_is_stopped_and_reaped(tiny, monkeypatch, tmp_path):
    """A compile error or a template error ends the run before the weights are wanted: the child
    dequantizing them is killed and waited for, not left running."""
    import os
    import time

    from sgcli.engine import gguf_pending, gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf

    path, _ = tiny
    folder = convert_gguf(path)
    marker = tmp_path / "child.pid"

    def slow(lay, buffer):
        marker.write_text(str(os.getpid()))
        time.sleep(60)

    monkeypatch.setattr(gguf_recipe, "fill", slow)
    pending = gguf_pending.PendingState(folder, path)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    pending.cancel()
    assert time.monotonic() - started < 5
    assert not os.path.exists(f"/proc/{marker.read_text()}")


def test_nan_weights_found_by_the_child_are_exit_2_naming_the_file(tmp_path):
    """The child checks the weights it makes (`gguf_recipe.value_problem`, the check the loader runs on
    the rest): NaN bytes in the .gguf are found there, and the load ends as without the child."""
    from sgcli.engine.gguf_convert import convert_gguf
    from sgcli.engine.loader import load_model, start_weights
    from sgcli.errors import UserError
    from sgcli.models.refs import ModelRef
    from sgcli.tokenizers.gguf_meta import read_tensor_index

    path = write_tiny_gguf(tmp_path / "nan.gguf", seed=6)
    norm = next(t for t in read_tensor_index(path) if t.name == "blk.1.attn_norm.weight")
    data = bytearray(path.read_bytes())
    data[norm.offset : norm.offset + 16] = np.full(4, np.nan, dtype=np.float32).tobytes()
    path.write_bytes(bytes(data))
    convert_gguf(path)
    ref = ModelRef("gguf", str(path), path.name)
    pending = start_weights(ref)
    assert pending is not None
    with pytest.warns(UserWarning, match="cannot be used .*layers.1.input_layernorm.*NaN.*converting again"):
        with pytest.raises(UserError) as exc:
            load_model(ref, device="cpu", kernel="torch", pending=pending)
    assert pending.problem is not None and "NaN" in pending.problem
    assert "unusable even when freshly converted" in exc.value.message


def test_the_loader_skips_only_the_weights_the_child_checked(tiny):
    """`weights_problem` leaves out what lies in the child's memory, and nothing else."""
    from sgcli.engine import gguf_pending
    from sgcli.engine.gguf_convert import convert_gguf

    path, _ = tiny
    folder = convert_gguf(path)
    pending = gguf_pending.PendingState(folder, path)
    state = pending.result()
    assert pending.problem is None
    name = "model.layers.0.mlp.up_proj.weight"
    assert pending.holds(state[name]) and pending.holds(state[name][3:5])
    assert not pending.holds(state[name].clone())
    assert not pending.holds(state["model.layers.1.self_attn.o_proj.weight"])  # stored: read from safetensors


def test_a_recipe_of_another_shape_starts_nothing_and_the_load_rebuilds_it(tiny):
    """A recipe whose JSON parses but lacks what this sgcli reads (an older or damaged one, its
    manifest in order) is no crash here: nothing starts, and the load converts again with a notice."""
    import json

    from sgcli.cache import conversions
    from sgcli.engine import gguf_recipe
    from sgcli.engine.gguf_convert import convert_gguf
    from sgcli.engine.loader import load_model, start_weights
    from sgcli.models.refs import ModelRef

    path, _ = tiny
    folder = convert_gguf(path)
    recipe = folder / gguf_recipe.RECIPE
    data = json.loads(recipe.read_text())
    del data["steps"]
    recipe.write_text(json.dumps(data))
    conversions.write_manifest(folder, path)  # the manifest in order: only the contents are off
    ref = ModelRef("gguf", str(path), path.name)
    assert start_weights(ref) is None
    with pytest.warns(UserWarning):
        lm = load_model(ref, device="cpu", kernel="torch", pending=None)
    assert lm.impl == "native"
