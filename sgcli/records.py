"""The JSON that sgcli prints, as pydantic models: a public interface with a version.

Commands build plain dicts (cheap, no pydantic import on the hot path); these models
document them, give `sgcli schema NAME` its JSON Schema, and let the tests check that
every real record matches (`extra="forbid"`: a new key must be added here first).
Bump `SCHEMA_VERSION` when a key is renamed or removed; adding one is a minor change.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union, get_args

from pydantic import BaseModel, ConfigDict, Field

from sgcli import RECORD_SCHEMA_VERSION as SCHEMA_VERSION


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Versioned(_Strict):
    schema_version: str = Field(SCHEMA_VERSION, description="version of sgcli's JSON formats")


class Usage(_Strict):
    prompt_tokens: Optional[int] = Field(None, description="tokens in the rendered prompt")
    completion_tokens: Optional[int] = Field(None, description="tokens generated")
    forced_tokens: Optional[int] = Field(
        None, description="generated tokens jump-forward appended without a forward pass of their own"
    )
    forward_passes: Optional[int] = Field(None, description="model forward passes, the prefill included")


class Timings(_Strict):
    load_ms: Optional[float] = Field(None, description="model load time, milliseconds")
    threads: Optional[int] = Field(None, description="torch CPU threads the model ran with")
    compile_ms: Optional[float] = Field(None, description="grammar compile (or cache load) time, milliseconds")
    first_token_ms: Optional[float] = Field(None, description="milliseconds from decode start to the first token")
    start_to_first_token_ms: Optional[float] = Field(
        None, description="milliseconds from process start (interpreter, imports, model load) to the first token"
    )
    tokens_per_s: Optional[float] = Field(None, description="decode speed after the first token")
    mask_ms_p50: Optional[float] = Field(None, description="median time to compute one token mask, ms")
    mask_ms_p99: Optional[float] = Field(None, description="99th percentile of the mask time, ms")
    request_ms: Optional[float] = Field(
        None, description="--engine: wall time of the HTTP request, client-side, milliseconds"
    )
    server_ms: Optional[float] = Field(None, description="--engine: the server's own time, where it reports one, ms")


class ThinkBudget(_Strict):
    tokens: Optional[int] = Field(None, description="--think-budget, or null for none")
    forced_end: bool = Field(False, description="the budget ran out and the end-of-thinking marker was forced")


class Fallback(_Strict):
    backend: str
    reason: str


class Weakened(_Strict):
    pointer: str = Field(..., description="JSON pointer of the keyword in the schema")
    keyword: str
    backend: str


class GenerationRecord(_Strict):
    """One generation (or one batch line that could not run: same keys, nulls where nothing ran)."""

    schema_version: str = Field(SCHEMA_VERSION, description="version of this record format")
    id: Any = Field(None, description="the request id (batch input), or null for a single prompt")
    prompt: Union[str, list[dict], None] = Field(None, description="the prompt, or the chat messages")
    output: Optional[str] = Field(None, description="the generated text (after the reasoning, if any)")
    parsed: Any = Field(None, description="the output parsed as JSON, where the constraint is JSON")
    valid: Optional[bool] = Field(
        None, description="an independent check passed (true), failed (false), or could not run (null)"
    )
    validated_by: Optional[str] = Field(
        None, description="what checked it: jsonschema, lark, regex, choices, structural_tags, unconstrained"
    )
    unchecked: Optional[str] = Field(None, description="why nothing independent could check it (valid is null)")
    errors: list[str] = Field(default_factory=list, description="why the output is not valid, or why nothing ran")
    finish_reason: Literal["stop", "length", "error"] = Field(
        ..., description="stop: the grammar or the model ended; length: --max-tokens; error: see errors"
    )
    backend: Optional[str] = Field(None, description="the grammar backend that constrained the output")
    fallbacks: list[Fallback] = Field(default_factory=list, description="backends `auto` tried first, and why not")
    weakened: list[Weakened] = Field(
        default_factory=list, description="schema keywords the backend does not enforce, at their pointers"
    )
    warnings: list[str] = Field(default_factory=list, description="what the backend weakened or ignored")
    model: Optional[str] = Field(None, description="the model that generated, as the user named it")
    engine: Optional[str] = Field(None, description="the serving engine (--engine) that generated; absent: in-process")
    device: Optional[str] = Field(None, description="where the in-process model ran: cpu, cuda:0, mps")
    dtype: Optional[str] = Field(None, description="the model's weights dtype: float32, bfloat16, float16")
    chat_template: Optional[str] = Field(
        None,
        description="the chat template the prompt went through: its name (default, or the --template-name), "
        "mistral-common, none (--raw, or a tokenizer without one), or null (a batch line that was no request)",
    )
    usage: Usage = Field(default_factory=Usage, description="token counts")
    timings: Timings = Field(default_factory=Timings, description="where the time went")
    reasoning: Optional[str] = Field(None, description="free text before the end-of-thinking marker (--reasoning)")
    think_budget: Optional[ThinkBudget] = Field(
        None, description="the thinking budget and whether it ran out (--reasoning)"
    )


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


class BackendRow(_Versioned):
    """One row of `sgcli backends --json`."""

    backend: str
    available: bool
    version: Optional[str]
    unavailable_reason: Optional[str]
    description: str
    kinds: list[str]
    json_options: list[str]
    notes: str
    enforces: bool  # its masks restrict tokens (false for the unconstrained 'none')
    jump_forward: bool  # it can report bytes the grammar forces next
    cacheable: bool  # its compiled grammars are kept in the on-disk cache
    default: bool
    auto_rank: Optional[int]


class EngineRow(_Versioned):
    """One row of `sgcli backends --engines --json`."""

    engine: str
    description: str
    kinds: list[str]
    json_options: list[str]
    routes: list[str]
    raw_route: Optional[str]
    subgrammars: bool
    server_backends_per_request: bool
    notes: str


class CompareRow(_Versioned):
    """One row of `sgcli compare-backends --output-format json|jsonl`: a backend and a JSON layout variant.
    Every row has every key; nulls where the mode (--no-generate or a generation) does not fill one."""

    backend: str
    variant: str = Field(..., description="the JSON layout variant (--whitespace), e.g. flexible, compact, indent=2")
    compile_ms: Optional[float] = Field(None, description="grammar compile (or cache load) time")
    mask_ms_p50: Optional[float] = Field(None, description="median time to compute one token mask")
    mask_ms_p99: Optional[float] = Field(None, description="99th percentile of the mask time")
    tokens: Optional[int] = Field(None, description="tokens generated, or walked with --no-generate")
    tokens_per_s: Optional[float] = Field(None, description="decode speed (generation only)")
    finish_reason: Optional[Literal["stop", "length", "error"]] = Field(None, description="generation only")
    valid: Optional[bool] = Field(
        None, description="the output passed the independent check (generation), or the backend took --text"
    )
    output: Optional[str] = Field(None, description="the generated text (generation only)")
    agree: Optional[bool] = Field(
        None, description="same output (or same masks with --no-generate) as the first backend of this variant"
    )
    warnings: list[str] = Field(default_factory=list, description="what the backend weakened or ignored")
    error: Optional[str] = Field(None, description="why this backend did not compile or could not run")
    skipped: bool = Field(False, description="the backend lacks the kind or option, or is not installed")
    errors: list[str] = Field(default_factory=list, description="why the output is not valid (generation only)")
    allowed_first: Optional[int] = Field(None, description="--no-generate: tokens the first mask allows")
    rejected_at_token: Optional[int] = Field(None, description="--no-generate: the token index that --text broke at")


class CompileRow(_Versioned):
    """One row of `sgcli compile --output-format json|jsonl`: one file on one backend."""

    path: str = Field(..., description="the grammar file, @name, or the flag that gave the constraint")
    kind: str
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


class TestBackend(_Strict):
    __test__ = False
    backend: str
    status: str = Field(..., description="ran, or why the backend could not run the file")
    message: Optional[str] = None
    cache: Optional[str] = None


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
    instance: int
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
    tokens_per_s_jump_forward: Optional[float]
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


class MaskSample(_Strict):
    id: int
    text: str


class _MaskState(_Strict):
    n_allowed: int = Field(..., description="tokens the mask allows")
    can_stop: bool = Field(..., description="the grammar may end here")
    forced: str = Field(..., description="bytes the grammar forces next (empty: none)")
    sample: list[MaskSample] = Field(..., description="some of the allowed tokens")


class MaskStep(_Versioned, _MaskState):
    """One token of `sgcli masks --output-format json|jsonl` (type: step): the mask before it."""

    type: Literal["step"]
    index: int
    token: int = Field(..., description="the token id")
    text: str = Field(..., description="the token's text")
    offset: int = Field(..., description="byte offset of the token in --text")
    allowed: bool = Field(..., description="the mask allowed this token")


class MaskState(_MaskState):
    pass


class MaskRejection(_Strict):
    token_index: int
    token: int
    text: str
    token_offset: int
    byte_offset: int = Field(..., description="the first byte the grammar refused")
    next_bytes: str = Field(..., description="the bytes that may come there, as a character class")
    note: Optional[str] = None
    allowed: MaskState


class MaskSummary(_Versioned):
    """The last record of `sgcli masks --output-format json|jsonl` (type: summary)."""

    type: Literal["summary"]
    backend: str
    verdict: str = Field(..., description="accepted, prefix, rejected, or start (no --text)")
    tokens: int
    end: Optional[MaskState] = Field(None, description="the state after the text (absent when rejected)")
    rejected: Optional[MaskRejection] = None
    note: Optional[str] = None


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


class ConfigSetting(_Versioned):
    """One setting, from `sgcli config --output-format jsonl` (and inside the json document)."""

    key: str
    value: Any = Field(None, description="the resolved value (flags aside), null: the built-in default")
    source: str = Field(..., description="default, env SGCLI_X, or the file and table it came from")
    help: str


class ConfigDocument(_Versioned):
    """`sgcli config --output-format json`."""

    path: Optional[str] = Field(None, description="the configuration file, or null for none")
    table: Optional[str] = Field(None, description="[tool.sgcli] in a pyproject.toml, empty in sgcli.toml")
    settings: list[ConfigSetting]


class CacheSection(_Versioned):
    """One cache section, from `sgcli cache info --output-format jsonl` (and inside the json document)."""

    section: str
    path: str
    entries: int
    size_bytes: int


class CacheInfo(_Versioned):
    """`sgcli cache info --output-format json`."""

    root: str
    sections: list[CacheSection]
    size_bytes: int


class ClearedSection(_Versioned):
    """One section `sgcli cache clear --output-format jsonl` removed (and inside the json document)."""

    section: str
    path: str


class CacheCleared(_Versioned):
    """`sgcli cache clear --output-format json`."""

    root: str
    cleared: list[ClearedSection]


class TokenPiece(_Strict):
    id: int
    text: str = Field(..., description="the piece as text (escapes for control characters and stray bytes)")
    hex: str = Field(..., description="the piece's bytes")
    special: bool


class Collisions(_Strict):
    ids: int = Field(..., description="ids lost if the vocabulary were keyed by this")
    groups: int
    examples: list[dict[str, Any]] = Field(..., description="{bytes|text, ids} of the largest groups")
    note: Optional[str] = None


class SpecialTokens(_Strict):
    count: int
    tokens: list[TokenPiece]


class ReachableBytes(_Strict):
    count: int = Field(..., description="bytes some single-byte token writes, of 256")
    all: bool
    missing: list[str] = Field(..., description="the others, as 0xNN")
    unwritable: Optional[list[str]] = Field(None, description="missing bytes valid in UTF-8 that no token contains")
    note: Optional[str] = None


class Tokenization(_Strict):
    text: str
    ids: Optional[list[int]] = None
    pieces: Optional[list[TokenPiece]] = None
    round_trip: Optional[bool] = Field(None, description="the pieces' bytes are exactly the text's")
    error: Optional[str] = Field(None, description="why the text could not be tokenized")


class ChatTemplates(_Strict):
    names: list[str]


class TokenizerReport(_Versioned):
    """`sgcli tokenizer inspect --output-format json|jsonl`."""

    tokenizer: str
    source: Optional[str] = Field(None, description="where the vocabulary was read from")
    type: str = Field(..., description="byte_level, byte_fallback, ...")
    size: int
    ordinary: int
    special: SpecialTokens
    eos_id: Optional[int]
    bos_id: Optional[int]
    stop_ids: list[int]
    stop_tokens: list[str]
    add_prefix_space: bool
    add_bos: bool
    byte_collisions: Collisions
    text_collisions: Collisions
    reachable_bytes: ReachableBytes
    chat_template: Optional[ChatTemplates] = Field(None, description="the chat templates it ships, or null")
    notes: list[str]
    tokenization: Optional[Tokenization] = Field(None, description="--text: how it is written as tokens")


class TokenizerSide(_Strict):
    tokenizer: str
    size: int


class DifferingBytes(_Strict):
    count: int
    examples: list[dict[str, Any]] = Field(..., description="{id, a, b}: the pieces of each side")


class TokenizationDiff(_Strict):
    text: str
    a: Optional[list[int]]
    b: Optional[list[int]]
    same: bool


class TokenizerDiff(_Versioned):
    """`sgcli tokenizer diff A B --output-format json|jsonl`."""

    a: TokenizerSide
    b: TokenizerSide
    fields: dict[str, dict[str, Any]] = Field(..., description="name -> {a, b} for each field that differs")
    size_difference: int
    differing_bytes: DifferingBytes
    special_only_in_a: list[int]
    special_only_in_b: list[int]
    only_in_a: list[TokenPiece]
    only_in_b: list[TokenPiece]
    tokenization: Optional[TokenizationDiff] = None
    same: bool


MODELS: dict[str, type[BaseModel]] = {
    "record": GenerationRecord,
    "diagnostic": Diagnostic,
    "backend": BackendRow,
    "engine": EngineRow,
    "compare": CompareRow,
    "compile": CompileRow,
    "test-case": TestCaseResult,
    "test-file": TestFileResult,
    "bench-item": BenchItem,
    "bench-backend": BenchBackend,
    "mask-step": MaskStep,
    "mask-summary": MaskSummary,
    "rule": Rule,
    "config": ConfigDocument,
    "config-setting": ConfigSetting,
    "cache-info": CacheInfo,
    "cache-section": CacheSection,
    "cache-cleared": CacheCleared,
    "cache-cleared-section": ClearedSection,
    "tokenizer": TokenizerReport,
    "tokenizer-diff": TokenizerDiff,
}


def json_schema(name: str) -> dict:
    return MODELS[name].model_json_schema()


def field_table(model: type[BaseModel] = GenerationRecord) -> str:
    """Markdown list of a model's fields (the README's field lists are generated from this)."""
    lines = []
    for name, info in model.model_fields.items():
        nested = _nested(info.annotation)
        keys = "{" + ", ".join(nested.model_fields) + "}" if nested else ""
        lines.append(f"- `{name}{keys}`: {info.description or ''}".rstrip(": ").rstrip())
    return "\n".join(lines)


def _nested(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation (`X`, `Optional[X]`, `list[X]`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_nested, get_args(annotation)) if m is not None), None)


_SECTION = re.compile(r"(<!-- fields: ([\w-]+) [^\n]*-->\n)(.*?)(\n<!-- /fields -->)", re.S)


def with_field_lists(text: str) -> str:
    """`text` (the README) with every `<!-- fields: NAME ... -->` section regenerated from MODELS[NAME]."""
    return _SECTION.sub(lambda m: m.group(1) + field_table(MODELS[m.group(2)]) + m.group(4), text)


if __name__ == "__main__":  # python -m sgcli.records README.md: regenerate its field lists
    import sys
    from pathlib import Path

    for arg in sys.argv[1:]:
        Path(arg).write_text(with_field_lists(Path(arg).read_text(encoding="utf-8")), encoding="utf-8")
