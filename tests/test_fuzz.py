"""Property-based fuzzing: random and mutated schemas, regexes, grammars and flag values.

Properties: no traceback and an exit code in {0, 1, 2} for anything a user can type; every
accepted constraint's outputs from the tiny random model pass the independent check
(jsonschema, Python's re), and the record's `valid` says exactly that. Examples are bounded
and derandomized so CI on 2 cores stays fast and repeatable.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from helpers import generate_with, patch_everywhere
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgcli.constraints.spec import ConstraintSpec, Kind

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
GENERATE = settings(FAST, max_examples=12)

# --- strategies -------------------------------------------------------------------------------

_scalars = st.one_of(st.integers(-5, 5), st.text(alphabet="abc", max_size=3), st.booleans(), st.none())
_leaf = st.one_of(
    st.just({"type": "integer"}),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-50, 50),
        st.integers(0, 100),
    ),
    st.builds(
        lambda n, m: {"type": "string", "minLength": n, "maxLength": n + m}, st.integers(0, 3), st.integers(0, 5)
    ),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.lists(_scalars, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(lambda v: {"enum": v}),
    st.sampled_from(["^[a-z]{1,4}$", "^[0-9]{1,3}$", "^(ab|cd)$"]).map(lambda p: {"type": "string", "pattern": p}),
)


def _object(props: dict) -> st.SearchStrategy:
    required = st.lists(st.sampled_from(sorted(props)), unique=True)
    return required.map(
        lambda req: {"type": "object", "properties": props, "required": req, "additionalProperties": False}
    )


schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda items, n: {"type": "array", "items": items, "maxItems": n}, inner, st.integers(0, 3)),
        st.dictionaries(st.text(alphabet="abxyz", min_size=1, max_size=4), inner, min_size=1, max_size=3).flatmap(
            _object
        ),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: {"anyOf": xs}),
    ),
    max_leaves=6,
)

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
# JSON values shaped like schemas: real keywords with values of any type.
_keyworded = st.dictionaries(
    st.sampled_from(
        [
            "type",
            "properties",
            "items",
            "enum",
            "const",
            "minimum",
            "pattern",
            "$ref",
            "anyOf",
            "required",
            "maxLength",
            "additionalProperties",
            "format",
            "$defs",
            "not",
        ]
    ),
    _json,
    max_size=4,
)

_atom = st.one_of(
    st.sampled_from(list("abc019")),
    # no \d: llguidance's \d takes digits of newer Unicode than Python's re knows (e.g. U+10D40)
    st.sampled_from(["[a-c]", "[0-9]", "[^a]", "\\.", " "]),
)
regexes = st.recursive(
    _atom,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
        st.tuples(inner, st.sampled_from(["?", "*", "+", "{1,3}", "{2}"])).map(lambda t: f"({t[0]}){t[1]}"),
    ),
    max_leaves=8,
)


@st.composite
def mutated(draw, base: st.SearchStrategy, alphabet: str) -> str:
    """A valid text with a few random edits: what a user's typo or a hostile file looks like."""
    text = draw(base)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        ch = draw(st.sampled_from(alphabet))
        if op == "insert":
            text = text[:i] + ch + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + 1 :]
        else:
            text = text[:i] + ch + text[i + 1 :]
    return text


# --- helpers ------------------------------------------------------------------------------------


def _clean_exit(result, allowed=(0, 1, 2)) -> None:
    assert result.exit_code in allowed, (result.exit_code, result.output)
    assert "internal error" not in result.output and "Traceback" not in result.output, result.output


def _file(tmp_path_factory, name: str, text: str):
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_text(text, encoding="utf-8")
    return path


# --- CLI: never a traceback ---------------------------------------------------------------------


@FAST
@given(text=st.one_of(mutated(schemas.map(json.dumps), alphabet='{}[]":,0a\\ '), _keyworded.map(json.dumps)))
def test_any_schema_file_lints_and_compiles_without_a_crash(run_cli, tmp_path_factory, text):
    path = _file(tmp_path_factory, "s.json", text)
    _clean_exit(run_cli("lint", "-b", "llguidance", path))
    _clean_exit(run_cli("compile", "-b", "llguidance", path))


@FAST
@given(text=st.one_of(mutated(regexes, alphabet="()[]{}|*+?\\^$-,a1"), st.text(max_size=12)))
def test_any_regex_compiles_or_is_refused_cleanly(run_cli, tmp_path_factory, text):
    path = _file(tmp_path_factory, "r.regex", text)
    for backend in ("llguidance", "xgrammar"):
        _clean_exit(run_cli("compile", "-b", backend, path))


GBNF = 'root ::= item ("," item)*\nitem ::= [a-z]+ | "(" root ")"\n'


@FAST
@given(text=mutated(st.just(GBNF), alphabet='()[]|*+?"\\:=- \na'))
def test_any_mutated_gbnf_lints_and_compiles_without_a_crash(run_cli, tmp_path_factory, text):
    path = _file(tmp_path_factory, "g.gbnf", text)
    _clean_exit(run_cli("lint", path))
    _clean_exit(run_cli("compile", path))


@pytest.fixture
def stop_before_loading(monkeypatch):
    """Flags that pass the checks reach the tokenizer load, which stops the run with a known message."""
    from sgcli.errors import UserError

    def stop(*args, **kwargs):
        raise UserError("FLAGS-ACCEPTED")

    import sgcli.tokenizers

    patch_everywhere(monkeypatch, sgcli.tokenizers, "load_tokenizer", stop)


@FAST
@given(
    temperature=st.one_of(st.floats(), st.sampled_from([0.0, 0.7, 100.0, 1e308, -0.0])),
    top_p=st.floats(),
    top_k=st.integers(-(2**40), 2**40),
    seed=st.integers(-(2**70), 2**70),
    max_tokens=st.integers(-5, 10**6),
)
def test_sampling_flags_accepted_exactly_in_range(
    run_cli, stop_before_loading, temperature, top_p, top_k, seed, max_tokens
):
    args = ["generate", "--regex", "a", "--temperature", repr(temperature), "--top-p", repr(top_p)]
    args += ["--top-k", top_k, "--seed", seed, "--max-tokens", max_tokens, "hi"]
    result = run_cli(*args)
    _clean_exit(result, allowed=(2,))
    valid = (
        math.isfinite(temperature)
        and 0 <= temperature <= 100
        and math.isfinite(top_p)
        and 0 < top_p <= 1
        and top_k >= 0
        and 0 <= seed < 2**64
        and max_tokens >= 1
    )
    assert ("FLAGS-ACCEPTED" in result.output) == valid, result.output


@FAST
@given(
    device=st.one_of(
        st.sampled_from(["auto", "cpu", "cuda", "cuda:0", "cuda:99", "gpu", "cuda:-1", ""]), st.text(max_size=8)
    )
)
def test_device_flag_never_crashes(run_cli, stop_before_loading, device):
    result = run_cli("generate", "--regex", "a", "--device", device, "hi")
    _clean_exit(result, allowed=(2,))
    if device in ("auto", "cpu"):
        assert "FLAGS-ACCEPTED" in result.output


# --- accepted constraints: the tiny random model's outputs pass the independent check -----------


@GENERATE
@given(schema=schemas, seed=st.integers(0, 1000))
def test_schema_outputs_pass_jsonschema(tiny_lm, smol_tokenizer, schema, seed):
    import jsonschema

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "fuzz.json")
    record = generate_with(tiny_lm, smol_tokenizer, spec, seed=seed, max_tokens=120, backend="llguidance")
    if record["finish_reason"] != "stop":
        assert record["valid"] is False
        return
    instance = json.loads(record["output"])
    assert jsonschema.Draft202012Validator(schema).is_valid(instance), (schema, record["output"])
    assert record["valid"] is True and record["parsed"] == instance


@GENERATE
@given(pattern=regexes, seed=st.integers(0, 1000), backend=st.sampled_from(["llguidance", "xgrammar"]))
def test_regex_outputs_fullmatch(tiny_lm, smol_tokenizer, pattern, seed, backend):
    spec = ConstraintSpec(Kind.REGEX, pattern, "--regex")
    record = generate_with(tiny_lm, smol_tokenizer, spec, seed=seed, max_tokens=40, backend=backend)
    if record["finish_reason"] != "stop":
        assert record["valid"] is False
        return
    matches = re.fullmatch(pattern, record["output"], flags=re.DOTALL) is not None
    assert record["valid"] is matches  # the record is honest either way
    assert matches, (pattern, record["output"])
