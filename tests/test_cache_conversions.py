"""The cache of converted models and tokenizers: keyed by content, checked on every use, rebuilt
with a notice when damaged, published atomically so concurrent first runs both succeed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import patch_everywhere

from sgcli.cache import conversions
from sgcli.cache.paths import converted_dir
from sgcli.errors import UserError
from sgcli.tokenizers.gguf import FOLDER_FORMAT

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _converted(tmp_path: Path, name: str = "model") -> Path:
    """A published conversion with a 5 MB weights file and a config, as the loader writes them."""
    source = tmp_path / "m.gguf"
    source.write_bytes(os.urandom(1000))
    out = converted_dir(source) / name
    staged = conversions.staging(out)
    (staged / "model.safetensors").write_bytes(os.urandom(5 << 20))
    (staged / "config.json").write_text('{"model_type": "llama"}')
    assert conversions.publish(staged, out, source) == out
    return out


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip a byte":
        data[100] ^= 0xFF  # in the header (first MiB), which the cheap check always hashes
    elif how == "truncate":
        data = data[: len(data) - 4096]
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flip a byte", "truncate", "empty", "no manifest", "missing file"])
def test_damaged_conversions_are_detected_reported_and_set_aside(tmp_path, how):
    out = _converted(tmp_path)
    assert conversions.problem(out) is None
    if how == "no manifest":
        (out / conversions.MANIFEST).unlink()
    elif how == "missing file":
        (out / "config.json").unlink()
    else:
        _damage(out / "model.safetensors", how)
    assert conversions.problem(out) is not None
    with pytest.warns(UserWarning, match="is damaged .*converting it again"):
        assert not conversions.usable(out, "conversion of m.gguf")
    assert not out.exists()


def test_a_conversion_that_cannot_be_looked_at_is_converted_again_not_a_crash(tmp_path, monkeypatch):
    """Another user's folder in a shared cache (stat: EACCES) was a PermissionError, exit 3."""
    out = _converted(tmp_path)
    real = os.stat

    def stat(path, *args, **kwargs):
        if os.fspath(path) == str(out):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    assert not conversions.usable(out, "conversion of m.gguf")


def test_the_key_is_the_content_not_the_path(tmp_path):
    data = os.urandom(3 << 20)
    a, b = tmp_path / "venv1" / "m.gguf", tmp_path / "venv2" / "m.gguf"
    for path in (a, b):
        path.parent.mkdir()
        path.write_bytes(data)
    assert converted_dir(a) == converted_dir(b)
    changed = bytearray(data)
    changed[0] ^= 1
    b.write_bytes(bytes(changed))
    os.utime(b, ns=(1, 1))  # a new mtime, as any rewrite gives
    assert converted_dir(a) != converted_dir(b)


def test_the_key_names_the_transformers_version_that_converts(tmp_path, monkeypatch):
    import importlib.metadata

    from sgcli.cache import paths

    source = tmp_path / "m.gguf"
    source.write_bytes(os.urandom(1 << 20))
    installed = importlib.metadata.version("transformers")
    before = converted_dir(source)
    assert before.name.endswith(f"-tf{installed}") and before.parent == paths.cache_root() / "models"
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9.9")
    upgraded = converted_dir(source)
    assert upgraded.name.endswith("-tf9.9.9") and upgraded != before  # an upgrade converts again


def test_two_writers_publishing_the_same_conversion_both_succeed(tmp_path):
    source = tmp_path / "m.gguf"
    source.write_bytes(b"gguf")
    out = converted_dir(source) / "tokenizer"
    first, second = conversions.staging(out), conversions.staging(out)
    assert first != second  # unique staging folders, never a shared `.partial`
    for staged, text in ((first, "one"), (second, "two")):
        (staged / "tokenizer.json").write_text(text)
    assert conversions.publish(first, out, source) == out
    assert conversions.publish(second, out, source) == out  # the loser keeps the winner's good copy
    assert (out / "tokenizer.json").read_text() == "one" and conversions.problem(out) is None
    assert [p.name for p in out.parent.iterdir()] == ["tokenizer"]  # nothing partial left behind


def test_an_unwritable_cache_is_exit_2_naming_sgcli_cache_dir_before_any_work(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # nothing can be created below a file, whoever runs the test
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(UserError, match="SGCLI_CACHE_DIR"):
        conversions.staging(converted_dir(blocker) / "model")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "sgcli", "compile", "@iso8601", "--backend", "xgrammar"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "cannot write the model cache" in result.stderr and "SGCLI_CACHE_DIR" in result.stderr
    assert "Traceback" not in result.stderr


def test_weights_check_catches_nan_and_random_bytes():
    import torch
    from helpers import random_llama

    from sgcli.engine.gguf_convert import weights_problem

    model = random_llama(64).model
    assert weights_problem(model) is None
    weight = model.model.layers[0].mlp.up_proj.weight
    with torch.no_grad():
        saved = weight[0, 0].item()
        weight[0, 0] = float("nan")
        assert "NaN" in weights_problem(model)
        garbage = torch.frombuffer(bytearray(b"\x5a" * 64), dtype=torch.float32)  # 1.5e16 each
        weight[0, :16] = garbage
        assert "implausible" in weights_problem(model)
        weight[0, :16] = saved
        assert weights_problem(model) is None


@pytest.mark.model
def test_concurrent_first_runs_both_convert_and_damaged_weights_are_rebuilt(tmp_path):
    """Two processes convert the default GGUF on an empty cache at once; then a byte of the cached
    recipe is changed and the next load rebuilds the conversion, with a notice."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", SGCLI_CACHE_DIR=os.environ["SGCLI_CACHE_DIR"])
    script = textwrap.dedent(
        """
        from sgcli.engine.loader import load_model
        from sgcli.models.refs import resolve_model
        from sgcli.tokenizers import load_tokenizer
        load_tokenizer(None)
        print(load_model(resolve_model(None), device="cpu", threads=1).ref.display)
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=900) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    models = Path(env["SGCLI_CACHE_DIR"]) / "models"
    (entry,) = [p for p in models.iterdir() if p.name != "CACHEDIR.TAG"]
    assert sorted(p.name for p in entry.iterdir()) == ["recipe", f"tokenizer{FOLDER_FORMAT}"]  # nothing partial left
    recipe = entry / "recipe" / "recipe.json"
    data = bytearray(recipe.read_bytes())
    data[len(data) // 2] ^= 0x01  # the recipe damaged: its manifest sees it
    recipe.write_bytes(bytes(data))
    rerun = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    assert "converting it again" in rerun.stderr + rerun.stdout
    from sgcli.cache.conversions import problem

    assert problem(entry / "recipe") is None


def test_a_cached_tokenizer_that_cannot_be_read_is_converted_again(tmp_path, monkeypatch):
    import json

    from sgcli.tokenizers import gguf

    broken, good = tmp_path / "broken", tmp_path / "good"
    for folder, text in ((broken, "{not json"), (good, '{"ok": true}')):
        folder.mkdir()
        (folder / "tokenizer.json").write_text(text)
    folders = iter([broken, good])
    patch_everywhere(monkeypatch, gguf, "cached_tokenizer_dir", lambda path, progress=None: next(folders))

    def read(folder):
        return json.loads((folder / "tokenizer.json").read_text())

    with pytest.warns(UserWarning, match="cached tokenizer .* cannot be read .*converting again"):
        assert gguf.load_converted(tmp_path / "m.gguf", read) == {"ok": True}
    assert not broken.exists()  # set aside, not used
    folders = iter([good, good])
    (good / "tokenizer.json").write_text("{still not json")
    with pytest.warns(UserWarning), pytest.raises(UserError, match="even when freshly converted") as exc:
        gguf.load_converted(tmp_path / "m.gguf", read)
    assert ".gguf file itself" in exc.value.hint


def _between_samples(size: int) -> int:
    """An offset that no sampled window reads (sgcli.cache.paths.sampled_digest): between the 8th and 9th."""
    return size * 8 // 17 + (64 << 10) + (100 << 10)


def test_a_changed_file_is_fully_rehashed_so_damage_between_the_samples_is_found(tmp_path):
    """A 4 KB region damaged in the middle of the weights passed the 17 sampled windows, silently."""
    out = _converted(tmp_path)
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    at = _between_samples(len(data))
    data[at : at + 4096] = bytes(4096)
    weights.write_bytes(bytes(data))  # same size, a new mtime
    assert conversions.problem(out) == "model.safetensors was modified after it was written (full checksum mismatch)"


def test_a_manifest_without_mtimes_means_a_full_check(tmp_path):
    import json

    out = _converted(tmp_path)
    manifest = json.loads((out / conversions.MANIFEST).read_text())
    weights = out / "model.safetensors"
    before = weights.stat()
    data = bytearray(weights.read_bytes())
    at = _between_samples(len(data))
    data[at] ^= 0xFF
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime it was written with
    for entry in manifest["files"].values():
        del entry["mtime_ns"]  # a manifest written before sgcli recorded them
    (out / conversions.MANIFEST).write_text(json.dumps(manifest))
    assert "full checksum mismatch" in conversions.problem(out)


def test_a_full_disk_while_converting_is_exit_2_naming_the_folder_and_the_space(tmp_path, monkeypatch):
    import errno
    import shutil

    from sgcli.engine import gguf_convert

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(os.urandom(1000))

    def fill(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gguf_convert, "_convert_into", fill)
    with pytest.raises(UserError) as exc:
        gguf_convert.convert_gguf(gguf)
    cache = converted_dir(gguf)
    assert f"the disk of the model cache is full: converting m.gguf needs about 1 MB in {cache}" in exc.value.message
    assert "SGCLI_CACHE_DIR" in exc.value.hint and not list(cache.glob(".recipe.partial-*"))  # staging removed

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=100 << 20))
    with pytest.raises(UserError, match="needs about 5,000 MB in .*, 105 MB are free"):
        conversions.ensure_space(tmp_path / "x" / "model", 5_000_000_000, "the dequantized m.gguf")


def test_a_full_check_that_passes_records_the_mtime_so_the_next_run_is_cheap(tmp_path, monkeypatch):
    """A manifest from before mtimes were recorded meant a full re-hash of 500 MB on every run (0.6-1.3 s
    of each warm start); once every byte has matched, the manifest takes the mtimes it confirmed."""
    import json

    out = _converted(tmp_path)
    manifest = json.loads((out / conversions.MANIFEST).read_text())
    for entry in manifest["files"].values():
        del entry["mtime_ns"]
    (out / conversions.MANIFEST).write_text(json.dumps(manifest))
    hashed = []
    real = conversions._full_digest
    monkeypatch.setattr(conversions, "_full_digest", lambda path: hashed.append(path.name) or real(path))
    assert conversions.problem(out) is None and "model.safetensors" in hashed
    hashed.clear()
    assert conversions.problem(out) is None and hashed == []  # the cheap check now
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[_between_samples(len(data))] ^= 0xFF
    weights.write_bytes(bytes(data))  # damage with a new mtime is still found
    assert "full checksum mismatch" in conversions.problem(out)


def test_a_conversion_is_stale_once_its_gguf_changes(tmp_path, monkeypatch):
    """A recipe reads the user's .gguf at every load: the manifest records the file (size, sha256,
    the paths and mtimes it was confirmed at). A new mtime with the same bytes costs one full hash,
    then is remembered; other bytes (even between the sampled windows), another size or no file at
    all make the folder stale."""
    source = tmp_path / "big.gguf"
    source.write_bytes(os.urandom(5 << 20))
    out = converted_dir(source) / "recipe"
    staged = conversions.staging(out)
    (staged / "recipe.json").write_text("{}")
    conversions.publish(staged, out, source)
    hashed = []
    real = conversions._full_digest
    monkeypatch.setattr(conversions, "_full_digest", lambda path: hashed.append(path.name) or real(path))
    assert conversions.problem(out, source) is None and hashed == []
    before = source.stat()
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))  # touched, same bytes
    assert conversions.problem(out, source) is None and hashed == ["big.gguf"]
    hashed.clear()
    assert conversions.problem(out, source) is None and hashed == []  # remembered
    copy = tmp_path / "venv2" / "big.gguf"  # the same file elsewhere: checked once, then trusted too
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    assert conversions.problem(out, copy) is None and conversions.problem(out, source) is None
    data = bytearray(source.read_bytes())
    data[_between_samples(len(data))] ^= 0xFF
    source.write_bytes(bytes(data))
    assert (
        conversions.problem(out, source)
        == "its source big.gguf has changed since it was converted (full checksum mismatch)"
    )
    source.write_bytes(bytes(data[:-10]))
    assert "its source big.gguf has 5,242,870 bytes, 5,242,880 when converted" == conversions.problem(out, source)
    source.unlink()
    assert "cannot be read" in conversions.problem(out, source)
    assert not conversions.usable(out, "conversion of big.gguf", source) and not out.exists()  # set aside


def test_a_tensor_type_gguf_py_cannot_read_is_named_not_blamed_on_the_tokenizer(tmp_path, monkeypatch):
    """gguf-py reads every tensor's header, so an unknown ggml type failed the tokenizer's conversion as
    "cannot build a vocabulary ... pass a tokenizer.json" (a hunt's .gguf with a removed type, 4)."""
    pytest.importorskip("transformers")
    import transformers

    from sgcli.tokenizers import gguf

    def refuse(*args, **kwargs):
        raise ValueError("np.uint32(4) is not a valid GGMLQuantizationType")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    with pytest.raises(UserError, match="a tensor of a type the installed gguf package cannot read") as caught:
        gguf._convert_with_transformers(tmp_path / "m.gguf", tmp_path / "out")
    assert "upgrade gguf" in caught.value.hint
