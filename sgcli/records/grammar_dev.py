"""What the grammar-development commands print: lint, compile, compare-backends, test, bench, masks, rule."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from sgcli.records.base import _Strict, _Versioned
from sgcli.records.generation import Weakened


class Diagnostic(_Versioned):
    """One `sgcli lint` finding (`--output-format json|json-lines`)."""

    code: str = Field(..., description="rule code, e.g. G001 (see `sgcli rule CODE`)")
    rule: str
    severity: Literal["error", "warning"]
    path: str
    line: Optional[int] = None
    col: Optional[int] = None
    end_line: Optional[int] = None
    end_col: Optional[int] = None
    message: str
    hint: Optional[str] = None
    backend: Optional[str] = None
    notes: list[str] = Field(default_factory=list)


class CompareRow(_Versioned):
    """One row of `sgcli compare-backends --output-format json|jsonl`: a backend and a JSON layout variant.
    Every row has every key; nulls where the mode (--no-generate or a generation) does not fill one."""

    backend: str
    variant: str = Field(
        ...,
        description="the JSON layout variant (--whitespace), e.g. flexible, compact, indent=2; '-' for a "
        "constraint no JSON layout shapes (a regex, a grammar)",
    )
    compile_ms: Optional[float] = Field(None, description="grammar compile (or cache load) time")
    cache: Optional[str] = Field(
        None, description="the on-disk cache: hit (compile_ms is a load), miss, off, not cacheable, ..."
    )
    mask_ms_p50: Optional[float] = Field(None, description="median time to compute one token mask")
    mask_ms_p99: Optional[float] = Field(None, description="99th percentile of the mask time")
    tokens: Optional[int] = Field(None, description="tokens generated, or walked with --no-generate")
    tokens_per_s: Optional[float] = Field(None, description="decode speed (generation only)")
    finish_reason: Optional[Literal["stop", "length", "repetition", "error"]] = Field(
        None, description="generation only"
    )
    valid: Optional[bool] = Field(
        None,
        description="the output passed the independent check (generation), or the backend took --text "
        "(the independent check's verdict on it for a backend that constrains nothing, `none`)",
    )
    output: Optional[str] = Field(None, description="the generated text (generation only)")
    agree: Optional[bool] = Field(
        None, description="same output (or same masks with --no-generate) as the first backend of this variant"
    )
    warnings: list[str] = Field(default_factory=list, description="what the backend weakened or ignored")
    error: Optional[str] = Field(None, description="why this backend did not compile or could not run")
    skipped: bool = Field(False, description="the backend lacks the kind or option, or is not installed")
    errors: list[str] = Field(default_factory=list, description="why the output (or, for `none`, --text) is not valid")
    allowed_first: Optional[int] = Field(None, description="--no-generate: tokens the first mask allows")
    rejected_at_token: Optional[int] = Field(None, description="--no-generate: the token index that --text broke at")


class CompileRow(_Versioned):
    """One row of `sgcli compile --output-format json|jsonl`: one file on one backend."""

    path: str = Field(..., description="the grammar file, @name, or the flag that gave the constraint")
    kind: Optional[str] = Field(..., description="null for a file whose kind its name does not tell (error)")
    backend: str
    status: Literal["ok", "error", "unsupported", "unavailable"]
    compile_ms: Optional[float] = Field(None, description="compile (or cache load) time; absent where none ran")
    cache: Optional[str] = Field(None, description="the on-disk cache: hit, miss, not stored, not cacheable, ...")
    cache_reason: Optional[str] = Field(None, description="why the cache did what it did")
    size: Optional[dict[str, int]] = Field(None, description="rules, normalized_chars and backend figures")
    warnings: list[str] = Field(default_factory=list)
    normalized: Optional[str] = Field(None, description="the grammar the backend compiled (--print only)")
    message: Optional[str] = Field(None, description="error, unsupported or unavailable: what went wrong")
    hint: Optional[str] = None
    location: Optional[str] = Field(None, description="error: file:line:col")
    line: Optional[int] = None
    col: Optional[int] = None
    limit: Optional[str] = Field(None, description="a compile limit was hit: the flag that raises it")
    backends_that_can: Optional[list[str]] = Field(None, description="unsupported: the backends that take it")
    checked: list[str] = Field(
        default_factory=list,
        description="JSON Schema keywords the grammar leaves to sgcli's schema checker, `keyword` at pointer",
    )
    unenforced: list[str] = Field(
        default_factory=list,
        description="keywords nothing enforces (neither the grammar nor the checker): exit 2 unless --allow-unenforced",
    )


class TestCaseResult(_Versioned):
    """One case on one backend, from `sgcli test --output-format json|jsonl` (type: case)."""

    __test__ = False  # not a pytest class
    type: Literal["case"]
    path: str = Field(..., description="the test file")
    case: int = Field(..., description="1-based index of the case in the file")
    line: Optional[int] = Field(None, description="line of the case in the test file")
    description: Optional[str] = None
    input: str
    accept: bool = Field(..., description="whether the grammar should accept the input")
    backend: str
    passed: bool
    checked: list[str] = Field(..., description="how it was fed: bytes, canonical, greedy tokenizations")
    problems: list[str] = Field(default_factory=list, description="why it failed")
    notes: list[str] = Field(default_factory=list)
    independent: Optional[str] = Field(
        None,
        description="on a failed case: what the independent check generate uses says of the input (valid but "
        "spelled another way than the backend writes it, or invalid so the case's expectation is wrong)",
    )


class TestBackend(_Strict):
    __test__ = False
    backend: str
    status: str = Field(..., description="ran, or why the backend could not run the file")
    message: Optional[str] = None
    cache: Optional[str] = None
    warnings: list[str] = Field(default_factory=list, description="what its compile weakened or ignored")


class TestFileResult(_Versioned):
    """One test file, after its cases, from `sgcli test --output-format json|jsonl` (type: file)."""

    __test__ = False
    type: Literal["file"]
    path: str
    kind: str
    ok: bool
    backends: list[TestBackend]
    passed: int
    failed: int


class Percentiles(_Strict):
    p50: Optional[float] = None
    p99: Optional[float] = None
    max: Optional[float] = None
    n: int


class BenchRejected(_Strict):
    instance: int = Field(..., description="its index among the item's instances, from 0")
    where: str = Field(
        ...,
        description="the instance as `sgcli test` names a case: 'x.test.yaml:6: case 4 ...', 'x.jsonl:3: instance 2'",
    )
    rejected_at_token: Optional[int]


class BenchItem(_Versioned):
    """One item on one backend, from `sgcli bench --output-format json|jsonl` (type: item)."""

    type: Literal["item"]
    item: str
    kind: str
    backend: str
    status: Literal["compiled", "failed"]
    reason: Optional[str] = Field(None, description="failed: unsupported, unavailable, compile error, compile limit")
    message: Optional[str] = None
    limit: Optional[str] = None
    compile_cold_ms: Optional[float] = None
    compile_cached_ms: Optional[float] = Field(None, description="a load from the on-disk cache, where it hit")
    cache: Optional[str] = None
    instances: Optional[int] = None
    instance_source: Optional[str] = Field(None, description="given, test file, or generated")
    masks: Optional[int] = Field(None, description="masks timed")
    mask_ms_p50: Optional[float] = None
    mask_ms_max: Optional[float] = None
    rejected: list[BenchRejected] = Field(default_factory=list, description="valid instances the backend rejected")


class BenchGeneration(_Strict):
    items: int
    max_tokens: int
    tokens_per_s: Optional[float]
    tokens_per_s_jump_forward: Optional[float] = Field(
        description="null where it was not measured: the engine or the backend has no jump-forward (see note)"
    )
    completed: int
    note: Optional[str] = None


class BenchBackend(_Versioned):
    """One backend's summary, from `sgcli bench --output-format json|jsonl` (type: backend)."""

    type: Literal["backend"]
    backend: str
    compiled: int
    failed: int
    failed_by_reason: dict[str, int]
    compile_cold_ms: Percentiles
    compile_cached_ms: Percentiles
    mask_ms: Percentiles
    instances_walked: int
    instances_rejected: int
    generation: Optional[BenchGeneration] = None


class _MaskPiece(_Strict):
    text: str = Field(..., description="the token's text (a byte that is not UTF-8 as \\xNN)")
    hex: str = Field(..., description="the token's bytes exactly, in hex")
    special: bool = Field(..., description="a special token (a control token, not the text its name spells)")


class MaskSample(_MaskPiece):
    id: int


class _MaskState(_Strict):
    n_allowed: int = Field(..., description="tokens the mask allows")
    can_stop: bool = Field(..., description="the grammar may end here")
    forced: str = Field(..., description="bytes the grammar forces next (empty: none)")
    forced_hex: str = Field(..., description="those bytes exactly, in hex")
    sample: list[MaskSample] = Field(..., description="some of the allowed tokens")


class MaskStep(_Versioned, _MaskState, _MaskPiece):
    """One token of `sgcli masks --output-format json|jsonl` (type: step): the mask before it."""

    type: Literal["step"]
    index: int
    token: int = Field(..., description="the token id")
    offset: int = Field(..., description="byte offset of the token in --text")
    allowed: bool = Field(..., description="the mask allowed this token")


class MaskState(_MaskState):
    pass


class MaskRejection(_MaskPiece):
    token_index: int
    token: int
    token_offset: int
    byte_offset: int = Field(..., description="the first byte the grammar refused")
    next_bytes: str = Field(..., description="the bytes that may come there, as a character class")
    can_stop_at_byte: bool = Field(False, description="the grammar could stop right before that byte")
    note: Optional[str] = None
    allowed: MaskState


class MaskError(_Strict):
    token_index: int = Field(..., description="the step whose mask left the matcher failed")
    message: str = Field(..., description="the backend's own error")
    mask: MaskState = Field(..., description="what the failed matcher's mask showed (no verdict on the text)")


class MaskCheck(_Strict):
    """The independent check on the whole --text (where the matcher accepted or rejected it)."""

    valid: Optional[bool] = Field(..., description="true, false, or null where nothing independent could check it")
    validated_by: Optional[str] = Field(None, description="jsonschema, lark, regex, ... as in generate's records")
    errors: list[str] = Field(default_factory=list, description="why the text breaks the constraint")
    unchecked: Optional[str] = Field(None, description="why nothing could check it (valid is null)")


class MaskSummary(_Versioned):
    """The last record of `sgcli masks --output-format json|jsonl` (type: summary)."""

    type: Literal["summary"]
    backend: str
    verdict: str = Field(
        ..., description="accepted, prefix, rejected, start (no --text), or error (the backend's matcher failed)"
    )
    tokens: int
    end: Optional[MaskState] = Field(None, description="the state after the text (absent when rejected)")
    rejected: Optional[MaskRejection] = None
    error: Optional[MaskError] = None
    note: Optional[str] = None
    independent: Optional[MaskCheck] = Field(
        None,
        description="the independent check on the text, apart from the backend: where it says valid and the "
        "verdict is rejected, the backend's grammar takes another spelling of the same value; where it says "
        "invalid and the verdict is accepted, the grammar does not enforce a keyword (sgcli's checker does)",
    )


class RuleCount(_Versioned):
    """One rule's findings, from `sgcli lint --statistics --output-format json|json-lines` (most first)."""

    code: str = Field(..., description="rule code, e.g. G001")
    name: str
    count: int = Field(..., description="how many findings of this rule")


class Rule(_Versioned):
    """One lint rule, from `sgcli rule CODE|--all --output-format json|jsonl`."""

    code: str
    name: str
    severity: Literal["error", "warning"]
    family: str
    needs: str = Field(..., description="what the rule needs: structure, a backend, a tokenizer, ...")
    summary: str
    explanation: str
    example: Optional[str] = None
    fix: Optional[str] = None


class RoundTrip(_Strict):
    ok: bool = Field(..., description="both grammars agreed on every string compared, and something was")
    checked: dict[str, int] = Field(..., description="how many strings were compared, by where they came from")
    backends: list[str] = Field(..., description="the backends both grammars were compared on")
    failures: list[str] = Field(..., description="each string one grammar accepts and the other refuses")
    notes: list[str]


class Conversion(_Versioned):
    """`sgcli convert FILE --to X --output-format json|jsonl`."""

    source: str = Field(..., description="the file converted")
    from_: str = Field(..., alias="from", description="its kind: ebnf, lark, regex, json_schema")
    to: str = Field(..., description="the kind printed: ebnf or lark")
    text: str = Field(..., description="the converted grammar")
    printed_by: str = Field(..., description="sgcli, or the backend whose translator printed a JSON Schema")
    unenforced: list[Weakened] = Field(..., description="keywords the printed grammar does not enforce")
    cases_file: Optional[str] = Field(..., description="the test file whose cases the round trip fed, or null")
    round_trip: Optional[RoundTrip] = Field(None, description="the round-trip check (absent with --no-check)")
