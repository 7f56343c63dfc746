"""GGUF tokenizers and their metadata: the conversion cache is keyed by every byte of the metadata, and
metadata a converter would trip on (special ids beyond the vocabulary) is refused naming the file and key."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from helpers import gguf_bytes as _gguf_bytes

TEMPLATE_V1 = "VERSION-1 {{ messages[-1].content }}"
TEMPLATE_V2 = "VERSION-2 {{ messages[-1].content }}"
MESSAGES = [{"role": "user", "content": "Hello there"}]


def _byte_alphabet() -> list[str]:
    from sgcli.tokenizers.pieces import byte_level_decoder

    return sorted(byte_level_decoder())


def tiny_meta(**extra) -> dict:
    """A byte-level vocabulary: 256 byte tokens, one merge and `<|endoftext|>` (id 257, its eos and bos)."""
    tokens = _byte_alphabet() + ["Ġt", "<|endoftext|>"]
    return {
        "general.architecture": "qwen2",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * 257 + [3],
        "tokenizer.ggml.merges": ["Ġ t"],
        "tokenizer.ggml.eos_token_id": 257,
        "tokenizer.ggml.bos_token_id": 257,
        **extra,
    }


SIZE = 4 << 20


def _sampled_offset_free(size: int) -> int:
    """An offset no window of `sgcli.cache.paths.sampled_digest` reads: between its 8th and 9th."""
    return size * 8 // 17 + (64 << 10) + (30 << 10)


def gguf_with_template_between_samples(path: Path, template: str) -> Path:
    """A SIZE-byte GGUF whose chat template lies where the sampled hash never looks (a padding string
    before it and one after), as the 1.8 MB template of a real file did."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def build(front: int, back: int) -> bytes:
        return _gguf_bytes(
            tiny_meta(**{"general.front": "f" * front, "tokenizer.chat_template": template, "general.back": "b" * back})
        )

    probe = build(0, 0)
    at = probe.index(template.encode())
    front = _sampled_offset_free(SIZE) - at
    data = build(front, 0)
    data = build(front, SIZE - len(data))
    assert len(data) == SIZE and data.index(template.encode()) == _sampled_offset_free(SIZE)
    path.write_bytes(data)
    return path


@pytest.fixture
def light(monkeypatch, tmp_path):
    """The light converter (fast) in a fresh cache, no tokenizer loaded yet."""
    import sgcli.tokenizers as tokenizers_pkg

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    monkeypatch.setattr("sgcli.tokenizers.gguf._transformers_converts", lambda: False)


def _render(path: Path) -> str:
    from sgcli.tokenizers import load_tokenizer

    text, _ = load_tokenizer(str(path)).render_chat(MESSAGES)
    return text


# --- D1: the cache key covers all of the metadata ---------------------------------------------------


def test_an_edited_chat_template_of_the_same_size_is_converted_again(tmp_path, light):
    """Two GGUFs of one name and size, differing only in their chat template: the second rendered the
    first's template from the cache (its key sampled the file, and the template lay between samples)."""
    from sgcli.cache.paths import converted_dir, sampled_digest

    v1 = gguf_with_template_between_samples(tmp_path / "v1" / "model.gguf", TEMPLATE_V1)
    v2 = gguf_with_template_between_samples(tmp_path / "v2" / "model.gguf", TEMPLATE_V2)
    assert sampled_digest(v1) == sampled_digest(v2)  # what the old key saw: the same file
    assert _render(v1) == "VERSION-1 Hello there"
    assert converted_dir(v1) != converted_dir(v2)
    assert _render(v2) == "VERSION-2 Hello there"


def test_a_template_edited_in_place_is_converted_again(tmp_path, light, monkeypatch):
    import sgcli.tokenizers as tokenizers_pkg

    path = gguf_with_template_between_samples(tmp_path / "model.gguf", TEMPLATE_V1)
    assert _render(path) == "VERSION-1 Hello there"
    data = path.read_bytes().replace(b"VERSION-1", b"VERSION-3")
    path.write_bytes(data)
    os.utime(path, ns=(1, 1))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    assert _render(path) == "VERSION-3 Hello there"


def test_the_header_walk_ends_where_the_reader_ends(tmp_path):
    """`gguf_layout.header_end` walks what `gguf_meta` decodes: the same end, tensors included; None for junk."""
    import mmap

    from sgcli.gguf_layout import header_end as gguf_header_end
    from sgcli.tokenizers.gguf_meta import _Reader

    gguf = gguf_with_template_between_samples(tmp_path / "m.gguf", TEMPLATE_V1)
    data = bytearray(gguf.read_bytes())
    with gguf.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        reader = _Reader(blob, gguf)
        reader.metadata()
        assert gguf_header_end(blob) == reader.pos
    # one tensor info after the metadata: its name, 2 dims, type and offset
    tensor = struct.pack("<Q", 3) + b"w.0" + struct.pack("<I2QIQ", 2, 4, 4, 0, 0)
    data[8:16] = struct.pack("<Q", 1)
    assert gguf_header_end(bytes(data) + tensor + bytes(64)) == len(data) + len(tensor)
    assert gguf_header_end(b"GGUF" + struct.pack("<IQQ", 3, 0, 5)) is None  # truncated
    assert gguf_header_end(b"not a gguf at all") is None


# --- D2: special ids beyond the GGUF's vocabulary ----------------------------------------------------


@pytest.mark.parametrize(
    "key, value", [("eos", 999999), ("bos", 258), ("eos", -1), ("padding", 5000), ("unknown", "one")]
)
@pytest.mark.parametrize("converter", ["light", "transformers"])
def test_a_special_id_beyond_the_vocabulary_is_exit_2_naming_the_file_and_key(
    tmp_path, run_cli, monkeypatch, key, value, converter
):
    """transformers' converter failed on it with an IndexError (exit 3); refused before converting."""
    import sgcli.tokenizers as tokenizers_pkg
    from sgcli.tokenizers import gguf as gguf_module

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    monkeypatch.setattr(gguf_module, "_transformers_converts", lambda: converter == "transformers")
    converted = []
    monkeypatch.setattr(gguf_module, "_convert_with_transformers", lambda *a: converted.append(a))
    monkeypatch.setattr(gguf_module, "convert_light", lambda *a: converted.append(a))
    path = tmp_path / "eosbig.gguf"
    path.write_bytes(_gguf_bytes(tiny_meta(**{f"tokenizer.ggml.{key}_token_id": value})))
    result = run_cli("tokenizer", "inspect", "--tokenizer", path)
    assert result.exit_code == 2, result.output
    assert "eosbig.gguf" in result.output and f"tokenizer.ggml.{key}_token_id" in result.output
    assert "ids 0 to 257" in result.output and converted == []


# --- D3: an eos_token the vocabulary lacks ------------------------------------------------------------


@pytest.fixture
def eos_folder(tmp_path, smol_tokenizer):
    def make(eos_token: str = "<|nope|>", **files) -> Path:
        import json

        folder = tmp_path / "eosunk"
        folder.mkdir()
        (folder / "tokenizer.json").symlink_to(smol_tokenizer.vocab.source)
        (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos_token}))
        for name, data in files.items():
            (folder / f"{name}.json").write_text(json.dumps(data))
        return folder

    return make


def test_an_eos_token_not_in_the_vocabulary_is_exit_2_naming_the_file_and_key(eos_folder, run_cli):
    """It reached llguidance as "Invalid buffer size" (exit 3) and xgrammar as wrong verdicts."""
    folder = eos_folder()
    result = run_cli("tokenizer", "inspect", "--tokenizer", folder)
    assert result.exit_code == 2, result.output
    assert "tokenizer_config.json" in result.output and '`eos_token` "<|nope|>" is not a token' in result.output
    assert "generation_config.json" in result.output  # the fix


@pytest.mark.parametrize("source", ["generation_config", "config"])
def test_an_eos_token_not_in_the_vocabulary_falls_back_to_a_configured_id_and_says_so(eos_folder, source):
    from sgcli.tokenizers import load_tokenizer

    folder = eos_folder(**{source: {"eos_token_id": 2}})
    with pytest.warns(UserWarning, match=rf"'<\|nope\|>' .* EOS is id 2 .*{source}.json"):
        tok = load_tokenizer(str(folder))
    assert tok.vocab.eos_id == 2 and 2 in tok.vocab.stop_ids
    assert any("EOS is id 2" in n for n in tok.vocab.notes)


@pytest.mark.parametrize("value", [99999999, -1, "two", [2, 99999999], True])
@pytest.mark.parametrize("source", ["generation_config", "config"])
def test_a_nonsense_configured_eos_id_is_exit_2_naming_file_and_key(eos_folder, run_cli, value, source):
    folder = eos_folder(**{source: {"eos_token_id": value}})
    result = run_cli("tokenizer", "inspect", "--tokenizer", folder)
    assert result.exit_code == 2, result.output
    assert f"{source}.json" in result.output and "`eos_token_id`" in result.output


def test_a_nonsense_generation_config_id_is_refused_even_beside_a_good_eos_token(eos_folder, run_cli):
    """It was dropped without a word (a stop the model's authors meant was lost)."""
    result = run_cli(
        "tokenizer", "inspect", "--tokenizer", eos_folder("<|im_end|>", generation_config={"eos_token_id": -1})
    )
    assert result.exit_code == 2, result.output
    assert "generation_config.json" in result.output


def test_a_nonsense_config_json_id_beside_a_good_eos_token_is_ignored_with_a_warning(eos_folder):
    """sgcli stops on the tokenizer's eos, not config.json's: a nonsense one is said, not refused."""
    from sgcli.tokenizers import load_tokenizer

    folder = eos_folder("<|im_end|>", config={"eos_token_id": 999999})
    with pytest.warns(UserWarning, match=r"config.json: `eos_token_id` is 999999.*ignored"):
        tok = load_tokenizer(str(folder))
    assert tok.vocab.eos_id == 2
