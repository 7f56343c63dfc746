"""The JSON that sgcli prints, as pydantic models: a public interface with a version.

Commands build plain dicts (cheap, no pydantic import on the hot path); these models
document them, give `sgcli schema NAME` its JSON Schema, and let the tests check that
every real record matches (`extra="forbid"`: a new key must be added here first).
Bump `SCHEMA_VERSION` when a key is renamed or removed; adding one is a minor change.
One module per family: `generation` (the generate record), `grammar_dev` (lint, compile,
compare, test, bench, masks, rule, convert), `environment` (backends, engines, config, cache, tokenizer,
template render).
"""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel

from sgcli.records.base import SCHEMA_VERSION as SCHEMA_VERSION
from sgcli.records.environment import (
    BackendRow,
    CacheCleared,
    CacheInfo,
    CacheSection,
    ClearedSection,
    ConfigDocument,
    ConfigSetting,
    EngineRow,
    RenderedPrompt,
    SchemaName,
    TokenizerDiff,
    TokenizerReport,
)
from sgcli.records.generation import GenerationRecord
from sgcli.records.grammar_dev import (
    BenchBackend,
    BenchItem,
    CompareRow,
    CompileRow,
    Conversion,
    Diagnostic,
    MaskStep,
    MaskSummary,
    Rule,
    RuleCount,
    TestCaseResult,
    TestFileResult,
)

MODELS: dict[str, type[BaseModel]] = {
    "record": GenerationRecord,
    "diagnostic": Diagnostic,
    "lint-statistics": RuleCount,
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
    "convert": Conversion,
    "template-render": RenderedPrompt,
    "config": ConfigDocument,
    "config-setting": ConfigSetting,
    "cache-info": CacheInfo,
    "cache-section": CacheSection,
    "cache-cleared": CacheCleared,
    "cache-cleared-section": ClearedSection,
    "tokenizer": TokenizerReport,
    "tokenizer-diff": TokenizerDiff,
    "schema-name": SchemaName,
}


def json_schema(name: str) -> dict:
    return MODELS[name].model_json_schema()


def field_table(model: type[BaseModel] = GenerationRecord) -> str:
    """Markdown list of a model's fields (the README's field lists are generated from this)."""
    lines = []
    for name, info in model.model_fields.items():
        nested = _nested(info.annotation)
        keys = "{" + ", ".join(nested.model_fields) + "}" if nested else ""
        lines.append(f"- `{info.alias or name}{keys}`: {info.description or ''}".rstrip(": ").rstrip())
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
