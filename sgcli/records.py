"""The JSON that sgcli prints, as pydantic models: a public interface with a version.

Commands build plain dicts (cheap, no pydantic import on the hot path); these models
document them, give `sgcli schema NAME` its JSON Schema, and let the tests check that
every real record matches (`extra="forbid"`: a new key must be added here first).
Bump `SCHEMA_VERSION` when a key is renamed or removed; adding one is a minor change.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from sgcli import RECORD_SCHEMA_VERSION as SCHEMA_VERSION


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    usage: Usage = Field(default_factory=Usage, description="token counts")
    timings: Timings = Field(default_factory=Timings, description="where the time went")
    reasoning: Optional[str] = Field(None, description="free text before the end-of-thinking marker (--reasoning)")
    think_budget: Optional[ThinkBudget] = Field(
        None, description="the thinking budget and whether it ran out (--reasoning)"
    )


class Diagnostic(_Strict):
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


class BackendRow(_Strict):
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


class EngineRow(_Strict):
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


MODELS: dict[str, type[BaseModel]] = {
    "record": GenerationRecord,
    "diagnostic": Diagnostic,
    "backend": BackendRow,
    "engine": EngineRow,
}


def json_schema(name: str) -> dict:
    return MODELS[name].model_json_schema()


def field_table(model: type[BaseModel] = GenerationRecord) -> str:
    """Markdown list of a model's fields (the README's record section is generated from this)."""
    lines = []
    for name, info in model.model_fields.items():
        nested = (
            info.annotation if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) else None
        )
        keys = "{" + ", ".join(nested.model_fields) + "}" if nested else ""
        lines.append(f"- `{name}{keys}`: {info.description or ''}".rstrip(": ").rstrip())
    return "\n".join(lines)
