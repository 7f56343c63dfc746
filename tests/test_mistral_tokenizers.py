"""Mistral tokenizers bundled in mistral-common: Tekken's exact-bytes vocabulary and the
SentencePiece versions read without the sentencepiece package."""

from __future__ import annotations

import json

import pytest

from sgcli.backends import get_backend
from sgcli.backends.base import allowed, new_bitmask
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.records import TokenizerReport
from sgcli.tokenizers import load_tokenizer

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})


@pytest.fixture(scope="module")
def tekken():
    return load_tokenizer("mistral:tekken")


def test_tekken_has_131072_ids_with_distinct_bytes(tekken):
    vocab = tekken.vocab
    assert len(vocab) == 131072
    assert vocab.special_ids == frozenset(range(1000))
    assert vocab.eos_id == 2 and vocab.bos_id == 1 and vocab.stop_ids == (2,)
    assert vocab.byte_collisions() == {}
    ordinary = [vocab.tokens[i] for i in vocab.ordinary_ids()]
    assert len(set(ordinary)) == len(ordinary) == 130072
    assert vocab.reachable_bytes() == set(range(256))
    assert [vocab.tokens[i] for i in range(4)] == [b"<unk>", b"<s>", b"</s>", b"[INST]"]  # specials keep their text


def test_tekken_decoded_text_would_collapse_1028_ids(tekken):
    """The measured problem sgcli avoids: keyed by decoded text, 1,028 ids vanish."""
    groups = tekken.vocab.text_collisions()
    assert sum(len(ids) for ids in groups.values()) - len(groups) == 1028
    assert "\ufffd" in groups  # partial UTF-8 pieces all decode to the replacement character


def test_tekken_encode_is_exact_bytes(tekken):
    vocab = tekken.vocab
    for text in ['{"a": 1}', "héllo 🌍\n\tworld", "[INST] not a control token"]:
        ids = vocab.encode(text)
        assert b"".join(vocab.tokens[i] for i in ids) == text.encode("utf-8")
        assert not set(ids) & vocab.special_ids


def test_tekken_pieces_reach_xgrammar_as_they_are(tekken):
    vocab = tekken.vocab
    encoded = get_backend("xgrammar").pieces_for_xgrammar(vocab)
    nul_led = [i for i in vocab.ordinary_ids() if vocab.tokens[i].startswith(b"\x00")]
    assert nul_led and all(encoded[i] == vocab.tokens[i] for i in nul_led)  # NUL too: `\x00` can match it
    assert encoded[2] == b""  # EOS: no bytes, allowed by id where the grammar can end
    assert all(encoded[i] == b"" for i in range(3, 1000))  # other specials: hidden from grammars
    ordinary = [encoded[i] for i in vocab.ordinary_ids()]
    assert len(set(ordinary)) == len(ordinary)  # still no duplicates in what xgrammar sees


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_tekken_json_schema_first_mask_and_walk(tekken, backend):
    """As SGLang's test: the first mask allows '{' and rejects a letter; then '{"a": 1}' walks to the end."""
    vocab = tekken.vocab
    compiled = get_backend(backend).compile(ConstraintSpec(Kind.JSON_SCHEMA, SCHEMA), vocab)
    matcher = compiled.matcher()
    mask = new_bitmask(len(vocab))
    matcher.fill_mask(mask)
    brace, letter = vocab.encode("{"), vocab.encode("z")
    assert len(brace) == len(letter) == 1
    assert allowed(mask, brace[0]) and not allowed(mask, letter[0])
    assert not allowed(mask, vocab.eos_id) and not allowed(mask, 1000)  # no stop, no NUL byte
    for token in vocab.encode('{"a": 1}'):
        matcher.fill_mask(mask)
        assert allowed(mask, token)
        assert matcher.accept(token), matcher.error
    assert matcher.can_stop()
    matcher.fill_mask(mask)
    assert allowed(mask, vocab.eos_id)


def test_tekken_older_file_loads_too():
    vocab = load_tokenizer("mistral:tekken-240718").vocab
    assert len(vocab) == 131072 and vocab.byte_collisions() == {}


def test_sentencepiece_v1_matches_reference_ids():
    """Ids of Mistral 7B v0.1's tokenizer.model as SentencePiece and Hugging Face produce them."""
    tok = load_tokenizer("mistral:v1")
    assert tok.encode("Hello world") == [22557, 1526]  # '▁Hello', '▁world': the dummy prefix
    assert tok.encode("[INST] 2+2 [/INST]") == [733, 16289, 28793, 28705, 28750, 28806, 28750, 733, 28748, 16289, 28793]
    assert tok.vocab.encode("Hello world") == [16230, 1526]  # continuation: no prefix space
    assert tok.prompt_ids("Hello world", templated=False)[0] == tok.vocab.bos_id == 1


@pytest.mark.parametrize("ref", ["mistral:v2", "mistral:v3", "mistral:v7"])
def test_sentencepiece_pieces_by_type(ref):
    vocab = load_tokenizer(ref).vocab
    assert len(vocab) == 32768 and vocab.vocab_type == "byte_fallback"
    assert vocab.tokens[:5] == [b"<unk>", b"<s>", b"</s>", b"[INST]", b"[/INST]"]
    assert {0, 1, 2, 3, 4} <= vocab.special_ids and vocab.stop_ids == (2,)
    byte_ids = [i for i, t in enumerate(vocab.tokens) if len(t) == 1 and i < 1100 and i not in vocab.special_ids]
    assert vocab.tokens[byte_ids[0]] == b"\x00" and len(byte_ids) >= 256  # <0x00>.. pieces are raw bytes
    assert vocab.reachable_bytes() == set(range(256))
    text = '{"k": "v"}\n  naïve 🌍'
    ids = vocab.encode(text)
    assert b"".join(vocab.tokens[i] for i in ids) == text.encode("utf-8")  # '▁' became a space


def test_unknown_mistral_name_is_a_usage_error(run_cli):
    result = run_cli("tokenizer", "inspect", "mistral:v9")
    assert result.exit_code == 2
    assert "unknown Mistral tokenizer 'mistral:v9'" in result.output and "mistral:tekken" in result.output


def test_inspect_tekken_json(run_cli):
    result = run_cli("tokenizer", "inspect", "mistral:tekken", "--json", "--text", '{"a": 1}')
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    TokenizerReport.model_validate(report)  # sgcli/records/: what `sgcli schema tokenizer` documents
    assert report["size"] == 131072
    assert report["byte_collisions"]["ids"] == 0 and report["byte_collisions"]["groups"] == 0
    assert report["text_collisions"]["ids"] == 1028
    assert report["reachable_bytes"]["all"] is True
    assert report["stop_ids"] == [2] and report["special"]["count"] == 1000
    tokens = report["tokenization"]
    assert tokens["round_trip"] and "".join(p["text"] for p in tokens["pieces"]) == '{"a": 1}'


@pytest.mark.parametrize("args", [[""], ["--tokenizer", ""]])
def test_inspect_of_an_empty_tokenizer_is_refused_not_read_as_the_default(run_cli, args):
    """`sgcli tokenizer inspect "$TOK"` with TOK unset showed the embedded model's tokenizer."""
    result = run_cli("tokenizer", "inspect", *args)
    assert result.exit_code == 2 and "the tokenizer is empty" in result.stderr
