"""What the commands about the environment print: backends, engines, config, cache, tokenizer."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from sgcli.records.base import _Strict, _Versioned


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


class SchemaName(_Versioned):
    """One of sgcli's JSON outputs, from `sgcli schema --output-format jsonl` (no NAME: the list)."""

    name: str = Field(..., description="what `sgcli schema NAME` takes")
    description: str = Field(..., description="which command prints it")


class ConfigSetting(_Versioned):
    """One setting, from `sgcli config --output-format jsonl` (and inside the json document)."""

    key: str
    value: Any = Field(
        None, description="the value that applies (flags aside): the environment's, the file's or the built-in default"
    )
    note: Optional[str] = Field(
        None, description="what the built-in value needs said beside it (threads: how many now), else null"
    )
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


class RenderedPrompt(_Versioned):
    """`sgcli template render --output-format json|jsonl`."""

    tokenizer: str
    template: Optional[str] = Field(..., description="the chat template's name, or null (none applied)")
    how_chosen: Optional[str] = Field(..., description="why that template")
    prompt: str = Field(..., description="the prompt exactly as generate renders it")
    num_tokens: int
    ids: Optional[list[int]] = Field(None, description="its token ids (--tokens)")
