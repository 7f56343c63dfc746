"""One vocabulary type from every source, and masks that agree across tokenizer families."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgcli.backends import get_backend
from sgcli.backends.base import allowed, new_bitmask
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.records import TokenizerDiff
from sgcli.tokenizers import load_tokenizer
from sgcli.tokenizers.vocab import RAW, Vocab

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
)
ACCEPTED = ['{"name": "Ann", "age": 3}', '{"name":"é 🌍 ü","age":-12}', '{"name": "a\\nb", "age": 0}']
REJECTED = [
    '{"name": 1, "age": 3}',
    '{"age": 3}',
    '{"name": "x", "age": 3.5}',
    '{"name": "x", "age": 3, "z": 1}',
    "hello",
    '{"name": "x\tb", "age": 3}',
]
FAMILIES = [None, "mistral:v3", "mistral:tekken"]  # SmolLM2 byte-level BPE, SentencePiece, Tekken


def byte_vocab() -> Vocab:
    """One token per byte: the reference that says at which byte a text goes wrong."""
    return Vocab(
        tokens=[bytes([b]) for b in range(256)] + [b"<eos>"],
        special_ids=frozenset({256}),
        stop_ids=(256,),
        vocab_type=RAW,
        source="bytes",
        eos_id=256,
        encode=lambda text: list(text.encode("utf-8")),
    )


def walk(vocab: Vocab, compiled, text: str):
    """Follow the masks token by token: ('accept',) or ('reject', start, end) of the refused token."""
    matcher, mask, pos = compiled.matcher(), new_bitmask(len(vocab)), 0
    for token in vocab.encode(text):
        matcher.fill_mask(mask)
        if not allowed(mask, token):
            return ("reject", pos, pos + len(vocab.tokens[token]))
        assert matcher.accept(token), f"mask allowed {token} but the matcher refused it: {matcher.error}"
        pos += len(vocab.tokens[token])
    matcher.fill_mask(mask)
    return ("accept",) if any(allowed(mask, s) for s in vocab.stop_ids) else ("incomplete", pos)


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_families_accept_and_reject_the_same_texts(backend):
    be = get_backend(backend)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, SCHEMA)
    reference = be.compile(spec, byte_vocab())
    bad_byte = {}
    for text in ACCEPTED + REJECTED:
        verdict = walk(reference.vocab, reference, text)
        assert verdict[0] == ("accept" if text in ACCEPTED else "reject"), (text, verdict)
        if verdict[0] == "reject":
            bad_byte[text] = verdict[1]
    for ref in FAMILIES:
        vocab = load_tokenizer(ref).vocab
        compiled = be.compile(spec, vocab)
        for text in ACCEPTED:
            assert walk(vocab, compiled, text) == ("accept",), (ref, text)
        for text in REJECTED:
            verdict, start, end = walk(vocab, compiled, text)
            assert verdict == "reject", (ref, text)
            assert start <= bad_byte[text] < end, (ref, text, start, end)  # refused at the token holding the bad byte


def test_default_vocab_is_byte_level_without_collisions(smol_tokenizer):
    vocab = smol_tokenizer.vocab
    assert vocab.vocab_type == "byte_level" and len(vocab) == 49152
    assert vocab.byte_collisions() == {}
    # eos, and the control token llama.cpp also ends generation on (the .gguf has no generation_config.json)
    assert vocab.stop_ids == (vocab.eos_id, 0) and vocab.tokens[vocab.eos_id] == b"<|im_end|>"
    assert vocab.tokens[0] == b"<|endoftext|>"
    ids = vocab.encode(" héllo\n")
    assert b"".join(vocab.tokens[i] for i in ids) == " héllo\n".encode()


def test_xgrammar_hides_empty_and_special_ids_and_matches_nul_pieces():
    # NUL-led pieces were once replaced by placeholders, which left `\x00` to no token at all
    tokens = [b"\x00", b"\x00ab", b"a", b"", b"<s>", b"</s>", b"{", b"\x01"]
    vocab = Vocab(
        tokens=tokens, special_ids=frozenset({4, 5}), stop_ids=(5,), vocab_type=RAW, source="t", eos_id=5, encode=None
    )
    be = get_backend("xgrammar")
    encoded = be.pieces_for_xgrammar(vocab)
    assert encoded[3] == b"" and encoded[4] == b"" and encoded[5] == b"" and encoded[0] == b"\x00"
    info = be.tokenizer_info(vocab)
    assert sorted(info.special_token_ids) == [3, 4] and list(info.stop_token_ids) == [5]
    mask = new_bitmask(len(vocab))
    for pattern, ids in [("a*", [2, 5]), ("[\\x00-\\x01]", [0, 7]), ("\\x00ab|\\x01", [0, 1, 7])]:
        be.compile(ConstraintSpec(Kind.REGEX, pattern), vocab).matcher().fill_mask(mask)
        assert [i for i in range(len(vocab)) if allowed(mask, i)] == ids, pattern


@pytest.mark.parametrize("regex", [r"<\|im_end\|>", ".+", "[^,]{10}", "[^,]{13}"])
def test_xgrammar_never_reads_a_stop_token_as_its_text(smol_tokenizer, regex):
    """The stop ids had been given their bytes: `<|im_end|>` (10 bytes) and `<|endoftext|>` (13) were
    matched as text, so the stop token was allowed before the grammar could end (an empty output)."""
    vocab = smol_tokenizer.vocab
    matcher = get_backend("xgrammar").compile(ConstraintSpec(Kind.REGEX, regex), vocab).matcher()
    mask = new_bitmask(len(vocab))
    matcher.fill_mask(mask)
    assert not matcher.can_stop() and not [i for i in vocab.stop_ids if allowed(mask, i)]


def test_prefix_space_tokenizer_json_has_exact_continuation(tmp_path):
    """A SentencePiece-style tokenizer.json: prompts get the dummy prefix, continuations do not."""
    from sgcli.tokenizers.mistral import tokenizer_file
    from sgcli.tokenizers.spm import build_encoder, read_spm

    build_encoder(read_spm(tokenizer_file("mistral:v1")), dummy_prefix=True).save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    tok = load_tokenizer(str(tmp_path))
    assert tok.vocab.vocab_type == "byte_fallback" and tok.vocab.add_prefix_space
    assert tok.encode("Hello world") == [22557, 1526]
    assert tok.vocab.encode("Hello world") == [16230, 1526]
    assert tok.vocab.stop_ids == (2,) and tok.vocab.tokens[3] == b"\x00"  # <0x00> is one raw byte


def _tokenizer_folder(tmp_path: Path, smol_tokenizer, config: dict | None) -> Path:
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").symlink_to(smol_tokenizer.vocab.source)
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_sources_folder_file_and_config_path(tmp_path, smol_tokenizer):
    folder = _tokenizer_folder(tmp_path, smol_tokenizer, {"eos_token": "<|im_end|>", "chat_template": "x"})
    for ref in (folder, folder / "tokenizer.json", folder / "tokenizer_config.json"):
        tok = load_tokenizer(str(ref))
        assert tok.vocab.tokens == smol_tokenizer.vocab.tokens
        assert tok.vocab.stop_ids == (2,) and tok.raw_chat_template == "x"


def test_tokenizer_json_without_config_guesses_eos_and_says_so(tmp_path, smol_tokenizer):
    folder = _tokenizer_folder(tmp_path, smol_tokenizer, None)
    vocab = load_tokenizer(str(folder / "tokenizer.json")).vocab
    assert vocab.eos_id == 0  # <|endoftext|>, the first known EOS name it holds
    assert any("guessed" in note for note in vocab.notes)


def test_an_eos_guessed_by_name_is_a_special_token_before_an_ordinary_one(tmp_path):
    """Gemma 3's tokenizer.json alone holds `</s>` as ordinary text (id 212) and `<eos>` as its special end:
    the name list's first, `</s>`, was taken, and a regex match ended at text that spelled it."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    words = {"<pad>": 0, "</s>": 1, "a": 2, "b": 3}
    hf = HFTokenizer(models.WordLevel(words, unk_token="<pad>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens(["<eos>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    vocab = load_tokenizer(str(tmp_path / "tokenizer.json")).vocab
    assert vocab.eos_id == 4 and vocab.stop_ids == (4,), vocab.notes
    assert any("'<eos>'" in note and "ordinary" not in note for note in vocab.notes), vocab.notes

    hf = HFTokenizer(models.WordLevel(words, unk_token="<pad>"))  # no special one: the ordinary, said so
    (tmp_path / "plain").mkdir()
    hf.save(str(tmp_path / "plain" / "tokenizer.json"))
    vocab = load_tokenizer(str(tmp_path / "plain" / "tokenizer.json")).vocab
    assert vocab.eos_id == 1 and any("ordinary token" in note for note in vocab.notes), vocab.notes


def test_sentencepiece_model_folder_with_template(tmp_path):
    from sgcli.tokenizers.mistral import tokenizer_file

    (tmp_path / "tokenizer.model").symlink_to(tokenizer_file("mistral:v3"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "[INST]{{ messages[0].content }}"}))
    tok = load_tokenizer(str(tmp_path))
    assert len(tok.vocab) == 32768 and tok.raw_chat_template.startswith("[INST]")
    assert tok.render_chat([{"role": "user", "content": "hi"}])[0] == "[INST]hi"


def test_sentencepiece_model_folders_template_sees_the_configs_special_tokens(tmp_path):
    """As a tokenizer.json folder's does (and transformers'): the .model's bos/eos, then the config's own."""
    from sgcli.tokenizers.mistral import tokenizer_file

    (tmp_path / "tokenizer.model").symlink_to(tokenizer_file("mistral:v3"))
    template = "{{ bos_token }}|{{ eos_token }}|{{ sep_token }}|{{ additional_special_tokens | join(',') }}"
    config = {"chat_template": template, "sep_token": "[SEP]", "additional_special_tokens": ["[A]"]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = load_tokenizer(str(tmp_path))
    assert tok.render_chat([{"role": "user", "content": "hi"}])[0] == "<s>|</s>|[SEP]|[A]"


def test_sentencepiece_model_folders_special_token_that_is_not_text_is_exit_2(tmp_path):
    from sgcli.errors import UserError
    from sgcli.tokenizers.mistral import tokenizer_file

    (tmp_path / "tokenizer.model").symlink_to(tokenizer_file("mistral:v3"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": 2}}))
    with pytest.raises(UserError, match=r"`eos_token` is \{\"content\": 2\}, not a string") as refused:
        load_tokenizer(str(tmp_path))
    assert refused.value.location.path == str(tmp_path / "tokenizer_config.json")


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p / "missing.json",
        lambda p: p,  # a folder holding no tokenizer
        lambda p: (p / "tokenizer.json").write_text("{not json") and p / "tokenizer.json",
        lambda p: (p / "notes.txt").write_text("hello") and p / "notes.txt",
    ],
)
def test_bad_tokenizer_sources_exit_2(tmp_path, run_cli, make):
    result = run_cli("tokenizer", "inspect", make(tmp_path))
    assert result.exit_code == 2, result.output
    assert "error" in result.output and "Traceback" not in result.output


ADDED_FLAGS = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}


@pytest.mark.parametrize(
    "added,expected",
    [
        ([], "has an empty vocabulary"),
        ([{"id": 0, "content": "<s>", "special": True, **ADDED_FLAGS}], "has only special tokens"),
    ],
)
def test_a_tokenizer_without_ordinary_tokens_is_exit_2(tmp_path, run_cli, added, expected):
    """llguidance failed inside on an empty vocabulary ("Invalid buffer size", exit 3)."""
    path = tmp_path / "t2.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}, "added_tokens": added}))
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert f"tokenizer {path} {expected}" in result.output


def test_inspect_human_and_json_for_the_default(run_cli):
    human = run_cli("tokenizer", "inspect", "default", "--text", "Hi!")
    assert human.exit_code == 0
    assert "49152 ids" in human.stdout and "none: every ordinary id has distinct bytes" in human.stdout
    report = json.loads(run_cli("tokenizer", "inspect", "default", "--json", "--text", "Hi!").stdout)
    assert report["stop_tokens"] == ["<|im_end|>", "<|endoftext|>"] and report["type"] == "byte_level"
    assert report["tokenization"]["round_trip"] and report["tokenization"]["ids"]
    assert report["reachable_bytes"]["count"] < 256 and "0x04" in report["reachable_bytes"]["unwritable"]


def test_diff_same_and_different(tmp_path, run_cli, smol_tokenizer):
    folder = _tokenizer_folder(
        tmp_path,
        smol_tokenizer,
        {
            "eos_token": "<|im_end|>",
            "bos_token": "<|im_start|>",
            "pad_token": "<|im_end|>",
            "unk_token": "<|endoftext|>",
        },
    )
    converted = Path(smol_tokenizer.vocab.source).parent / "generation_config.json"  # the .gguf's stop tokens
    (folder / "generation_config.json").symlink_to(converted)
    same = run_cli("tokenizer", "diff", "default", folder, "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["same"] is True
    other = run_cli("tokenizer", "diff", "mistral:v2", "mistral:v3", "--json")
    assert other.exit_code == 1
    report = json.loads(other.stdout)
    TokenizerDiff.model_validate(report)  # sgcli/records/: what `sgcli schema tokenizer-diff` documents
    assert report["same"] is False and report["differing_bytes"]["count"] > 0
    assert {"id": 10, "a": "[control_8]", "b": "[IMG]"} in report["differing_bytes"]["examples"]


@pytest.mark.parametrize(("difference", "said"), [(-16384, "b has 16384 fewer ids"), (1, "b has 1 more id")])
def test_diff_says_which_tokenizer_has_more_ids_in_words(monkeypatch, difference, said):
    """It printed "size: b has -16384 ids", which reads as a count, not a difference."""
    import io

    from rich.console import Console

    from sgcli.cli import tokenizer_cmd

    monkeypatch.setattr(tokenizer_cmd, "out", Console(file=io.StringIO(), width=200))
    sides = {"a": {"tokenizer": "a", "size": 49152}, "b": {"tokenizer": "b", "size": 49152 + difference}}
    report = sides | {"same": False, "fields": {}, "size_difference": difference, "differing_bytes": {"count": 0}}
    tokenizer_cmd._print_diff(report | {"special_only_in_a": [], "special_only_in_b": []})
    assert f"size: {said}\n" in tokenizer_cmd.out.file.getvalue()


def test_inspect_takes_tokenizer_as_every_command_does(run_cli):
    flag = run_cli("tokenizer", "inspect", "--tokenizer", "default", "--json")
    assert flag.exit_code == 0, flag.stderr
    assert json.loads(flag.stdout) == json.loads(run_cli("tokenizer", "inspect", "default", "--json").stdout)
    assert (
        json.loads(run_cli("tokenizer", "inspect", "--json").stdout)["tokenizer"]
        == json.loads(flag.stdout)["tokenizer"]
    )  # neither: the embedded model's, the default of every --tokenizer
    both = run_cli("tokenizer", "inspect", "default", "--tokenizer", "mistral:tekken")
    assert both.exit_code == 2 and "two tokenizers given" in both.stderr


def _mistral_data() -> Path:
    mistral_common = pytest.importorskip("mistral_common")
    return Path(mistral_common.__file__).parent / "data"


@pytest.mark.parametrize(
    "source,name",
    [
        ("mistral_instruct_tokenizer_240323.model.v3", "mistral_instruct_tokenizer_240323.model.v3"),
        ("tokenizer.model.v1", "tokenizer.model.v1"),
        ("mistral_instruct_tokenizer_241114.model.v7m1", "tok.model.v7m1"),
        ("mistral_instruct_tokenizer_240323.model.v3", "renamed.bin"),  # known by its bytes
        ("tekken_240911.json", "mytok.json"),  # known by its keys (was read as a HF tokenizer.json)
    ],
)
def test_tokenizer_files_are_known_by_content_not_name(tmp_path, run_cli, source, name):
    """A .model.v3 was "not a tokenizer file sgcli reads"; a Tekken file not named tekken* failed to parse."""
    path = tmp_path / name
    path.write_bytes((_mistral_data() / source).read_bytes())
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", path, "--backend", "llguidance")
    assert result.exit_code == 0, result.output
    assert "accepted" in result.output


@pytest.mark.parametrize(
    "content,expected",
    [
        ('{"a": 1, "b": 2}', "is JSON but not a tokenizer: its top-level keys are a, b"),
        ("\n\n\nhello", "is not a tokenizer file sgcli reads"),  # opens with 0x0a, as a protobuf does
    ],
)
def test_files_that_are_no_tokenizer_say_what_was_expected(tmp_path, run_cli, content, expected):
    path = tmp_path / ("x.json" if content.startswith("{") else "x.txt")
    path.write_text(content)
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", path)
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output


def test_a_gguf_ends_generation_where_llama_cpp_does():
    """A .gguf has no generation_config.json: a Llama 3 file naming `<|end_of_text|>` its eos ended chat
    turns only there, though its template closes each with `<|eot_id|>` (the file's eot)."""
    from sgcli.tokenizers.gguf import end_ids

    llama3 = {
        "tokenizer.ggml.tokens": ["a", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"],
        "tokenizer.ggml.token_type": [1, 3, 3, 3],
        "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.eot_token_id": 2,
    }
    assert end_ids(llama3) == [1, 2]
    gemma = {
        "tokenizer.ggml.tokens": ["<pad>", "<eos>", "<end_of_turn>", "<end_of_turn>x", "<|im_end|>"],
        "tokenizer.ggml.token_type": [3, 3, 3, 3, 1],  # an ordinary token spelled like one is text
        "tokenizer.ggml.eos_token_id": 1,
    }
    assert end_ids(gemma) == [1, 2]
    assert end_ids({"tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.eos_token_id": 7}) == []  # past the vocabulary


@pytest.mark.parametrize(
    "ref,says",
    [
        ("nonexist.json", "tokenizer file not found: nonexist.json"),
        ("./nonexist.json", "tokenizer file not found: ./nonexist.json"),
        ("spm.model", "tokenizer file not found: spm.model"),
        ("no/such/folder", "tokenizer path not found: no/such/folder"),
    ],
)
def test_a_missing_tokenizer_file_is_not_a_hub_or_model_problem(tmp_path, run_cli, monkeypatch, ref, says):
    """`--tokenizer nonexist.json` blamed an unreachable hub, `./nonexist.json` a missing model path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text('{"type": "integer"}')
    result = run_cli("lint", "s.json", "--tokenizer", ref)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert says in text and "hub" not in text.split("hint")[0] and "model path" not in text


def test_a_harmony_gguf_goes_on_past_end_of_a_channel():
    """gpt-oss closes each channel message with `<|end|>` and the answer with `<|return|>` (or `<|call|>`):
    as llama.cpp does, `<|end|>` ends nothing there."""
    from sgcli.tokenizers.gguf import end_ids

    harmony = {
        "tokenizer.ggml.tokens": ["a", "<|end|>", "<|return|>", "<|call|>", "<|endoftext|>"],
        "tokenizer.ggml.token_type": [1, 3, 3, 3, 3],
        "tokenizer.ggml.eos_token_id": 2,
    }
    assert end_ids(harmony) == [2, 3, 4]
    phi = {"tokenizer.ggml.tokens": ["a", "<|end|>"], "tokenizer.ggml.token_type": [1, 3]}
    assert end_ids(phi) == [1]


def test_the_encoder_spells_the_texts_own_bytes_with_ordinary_tokens(smol_tokenizer):
    """llguidance tokenizes the text its grammar forces with `Vocab.encode`: the tokenizer turned
    `<|im_end|>` written as text into the special id, which llguidance put in the mask and then refused
    ("Parser Error: token ... doesn't satisfy the grammar")."""
    vocab = smol_tokenizer.vocab
    ids = vocab.encode("a<|im_end|>b")
    assert b"".join(vocab.tokens[i] for i in ids) == b"a<|im_end|>b"
    assert not set(ids) & vocab.special_ids
    # and as the tokenizer itself spells those characters as text (transformers' split_special_tokens),
    # where longest-match had spelled text around them in other pieces (Gemma: "H" as byte <0x48>)
    from tokenizers import Tokenizer

    plain = Tokenizer.from_file(vocab.source)
    plain.encode_special_tokens = True
    for text in ("a<|im_end|>b", "Hello <|im_end|> world  x_y\tH", "<|im_start|>user"):
        assert vocab.encode(text) == plain.encode(text, add_special_tokens=False).ids, text


def test_a_normalizing_tokenizer_still_gets_the_texts_bytes(tmp_path, smol_tokenizer):
    """An NFKC normalizer writes `ﬁ` as `fi`: the ids for forced text must still spell `ﬁ`."""
    raw = json.loads(Path(smol_tokenizer.vocab.source).read_text(encoding="utf-8"))
    raw["normalizer"] = {"type": "NFKC"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(raw), encoding="utf-8")
    vocab = load_tokenizer(str(tmp_path / "tokenizer.json")).vocab
    ids = vocab.encode("xﬁ１")
    assert b"".join(vocab.tokens[i] for i in ids) == "xﬁ１".encode()


@pytest.mark.parametrize(
    "command",
    [
        ("compile",),
        ("masks",),
        ("test",),
        ("convert",),
        ("bench",),
        ("compare-backends",),
        ("lint",),
        ("tokenizer", "inspect"),
    ],
)
def test_every_tokenizer_flag_names_every_form_it_takes(command):
    """compile, masks, test, convert and bench said 'Model id, folder, .gguf or tokenizer.json' and
    compare-backends '(model ref, tokenizer.json, .gguf)', while each takes mistral:tekken, mistral:vN and default."""
    from helpers import cli_options

    from sgcli.cli.common import TOKENIZER_HELP

    text = cli_options(*command)["--tokenizer"].help
    assert TOKENIZER_HELP in text and all(form in text for form in ("mistral:tekken", "mistral:v1", "'default'")), text


@pytest.mark.parametrize("kind", ["tokenizer.json", "folder", "sentencepiece", "tekken"])
def test_a_tokenizer_file_past_the_size_limit_is_exit_2_unread(tmp_path, run_cli, monkeypatch, smol_tokenizer, kind):
    """A 69 MB tokenizer.json (3 million tokens) took 44 s and 1.6 GB, read without a limit by each
    loader: each now reads at most TOKENIZER_FILE_MAX_BYTES (64 MiB; here the file's size less one)."""
    from sgcli.tokenizers import files

    if kind in ("tokenizer.json", "folder"):
        folder = _tokenizer_folder(tmp_path, smol_tokenizer, {"eos_token": "<|im_end|>"})
        path = folder / "tokenizer.json"
        ref = folder if kind == "folder" else path
    else:
        source = "mistral_instruct_tokenizer_240323.model.v3" if kind == "sentencepiece" else "tekken_240911.json"
        path = ref = tmp_path / source
        path.write_bytes((_mistral_data() / source).read_bytes())
    limit = path.stat().st_size - 1
    monkeypatch.setattr(files, "TOKENIZER_FILE_MAX_BYTES", limit)
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", ref, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert f"{path} is over {limit:,} bytes, more than any tokenizer file sgcli reads" in result.output
    if kind != "sentencepiece":  # (the quickest to load)
        return
    monkeypatch.setattr(files, "TOKENIZER_FILE_MAX_BYTES", limit + 1)  # the file's own size passes
    assert run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", ref, "--backend", "llguidance").exit_code == 0
