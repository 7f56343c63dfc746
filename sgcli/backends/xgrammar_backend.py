"""xgrammar adapter: the default backend (as in SGLang)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sgcli.backends import structural_tag
from sgcli.backends.base import (
    Capabilities,
    Compiled,
    CompileWarning,
    LibraryBackend,
    SchemaKeywords,
    bitmask_words,
    lark_priority_warnings,
)
from sgcli.backends.diagnostics import _LINE_COL, grammar_error, native_message, schema_error
from sgcli.backends.native_stderr import capture_fd2
from sgcli.backends.pattern_gaps import PatternGap, declared_pattern_gaps
from sgcli.backends.schema_warnings import compile_warnings
from sgcli.backends.xgrammar_json import (
    compile_json_safe,
    json_format_kwargs,
    json_schema_grammar,
    name_pattern_warnings,
    schema_text,
)
from sgcli.backends.xgrammar_regex import (
    for_xgrammar,
    gbnf_for_xgrammar,
    lark_for_xgrammar,
    lark_regex_spans,
    misread,
    original_offset,
    tag_for_xgrammar,
    tag_regexes,
)
from sgcli.constraints.jsonpos import pointer_of
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.lark_backends import for_backends
from sgcli.dialects.regex_parse import LOOKAROUNDS
from sgcli.errors import UserError, offset_to_line_col
from sgcli.tokenizers.vocab import Vocab

_POSITION = re.compile(r"(?<=at )position (\d+)")

if TYPE_CHECKING:
    import numpy as np
    import xgrammar as xgr


_UNREADABLE_MESSAGE = (
    "rejected near a character beyond ASCII (xgrammar's own message cut it in two and cannot be read); "
    "its rule names take ASCII letters, digits and _ only, and the text must not start with a byte order mark"
)


def _char_column(text: str, m) -> str:
    """xgrammar's "line L, column C" with C in characters of line L of `text` (xgrammar counts bytes)."""
    line, col = int(m.group(1)), int(m.group(2))
    lines = text.split("\n")
    if 1 <= line <= len(lines):
        col = len(lines[line - 1].encode("utf-8")[: col - 1].decode("utf-8", errors="ignore")) + 1
    whole, start, end = m.group(0), m.start(2) - m.start(0), m.end(2) - m.start(0)
    return whole[:start] + str(col) + whole[end:]


# `format` values its grammar enforces (benchmarks/keyword_positions.py)
XGRAMMAR_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri", "uri-reference"}
)


class XGrammarMatcher:
    def __init__(self, handle, vocab_size: int):
        import xgrammar as xgr

        self._m = xgr.GrammarMatcher(handle)
        self._words = bitmask_words(vocab_size)
        self.error: str | None = None

    def fill_mask(self, bitmask: np.ndarray) -> None:
        self._m.fill_next_token_bitmask(bitmask.reshape(1, self._words))

    def accept(self, token_id: int) -> bool:
        ok = self._m.accept_token(token_id)
        if not ok:
            self.error = f"token {token_id} is not allowed by the grammar here"
        return ok

    def rollback(self, n: int) -> None:
        self._m.rollback(n)

    def jump_forward(self) -> bytes:
        return self._m.find_jump_forward_string().encode("utf-8")

    def is_terminated(self) -> bool:
        return self._m.is_terminated()

    def can_stop(self) -> bool:
        return self._m.is_completed()


@dataclass(eq=False)
class XGrammarCompiled(Compiled):
    handle: xgr.CompiledGrammar = field(kw_only=True)

    @property
    def normalized(self) -> str:
        """xgrammar's EBNF of the compiled grammar, printed when first asked for (printing took 20-25 us a
        compile, a fifth of a small cached one; generating never asks)."""
        if self._normalized is None:
            self._normalized = str(self.handle.grammar)
        return self._normalized

    @normalized.setter
    def normalized(self, text: str | None) -> None:
        self._normalized = text

    def matcher(self) -> XGrammarMatcher:
        return XGrammarMatcher(self.handle, len(self.vocab))

    def serialize(self) -> bytes | None:
        return self.handle.serialize_json().encode("utf-8")

    def size_info(self) -> dict[str, int]:
        return {"memory_size_bytes": int(self.handle.memory_size_bytes)}


class XGrammarBackend(LibraryBackend):
    module = "xgrammar"
    distribution = "xgrammar"
    name = "xgrammar"
    description = "xgrammar: pushdown automaton with precomputed token masks (SGLang's default)"
    capabilities = Capabilities(
        kinds=frozenset({Kind.JSON_SCHEMA, Kind.REGEX, Kind.EBNF, Kind.LARK, Kind.CHOICE, Kind.STRUCTURAL_TAG}),
        json_options=frozenset({"compact", "indent", "max_whitespace", "strict_properties"}),
        notes="EBNF in xgrammar's GBNF dialect; no custom whitespace pattern",
        jump_forward=True,
        prints_schema=True,
        cacheable=True,
        compiles_in_process=True,
        imports_torch=True,
        regex_dialect="ecma",
        # measured: benchmarks/keyword_positions.py and JSON-Schema-Test-Suite draft2020-12. Not enforced:
        # uniqueItems, contains, dependentRequired/Schemas, if/then/else, not, patternProperties,
        # propertyNames, unevaluated*, $dynamicRef; oneOf as anyOf; siblings of anyOf/oneOf dropped
        # ({"type": "integer", "minimum": 5, "anyOf": [...]} accepts 3); type-specific keywords
        # dropped without their `type`; allOf merged into its siblings; `required` of names `properties` does
        # not list; pattern beside format or a length; a length beside format; multipleOf of a number, of a
        # non-integer, or beside a bound
        schema_keywords=SchemaKeywords(
            enforced=frozenset(
                {"type", "enum", "const", "pattern", "minLength", "maxLength", "format"}
                | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
                | {"items", "prefixItems", "minItems", "maxItems"}
                | {"properties", "required", "additionalProperties", "minProperties", "maxProperties"}
                | {"anyOf", "allOf", "$ref"}
            ),
            through=frozenset({"properties", "additionalProperties", "items", "prefixItems", "anyOf", "oneOf"})
            | {"allOf", "$ref"},
            formats=XGRAMMAR_FORMATS,
            # 2023-02-30, second 60, 01.1.1.1, ::4.01.76.5, a 64-character label
            approximate_formats=frozenset({"date", "date-time", "time", "ipv4", "ipv6", "hostname"}),
            typed=frozenset(
                {"pattern", "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum"}
                | {"exclusiveMaximum", "multipleOf", "minItems", "maxItems", "required", "minProperties"}
                | {"maxProperties"}
            ),
            lone_all_of=True,
            raw_patterns="literal",  # `^a"b$` wrote `"a"b"`
            wide_shorthands=frozenset("DWsS"),  # as llguidance's, and `\\s` took U+FEFF, `\\S` U+0085
            optional_repeats=True,
            root_fragments=True,
            letter_anchors=True,  # cfn-lint's `^(vpc-)([a-z0-9]+)\Z` demanded a final Z
            # measured 2026-12-06: `maximum`, `minLength`, `required`, `additionalProperties` beside `$ref` took
            # values that break them (draft 2019-09 on; earlier drafts ignore a `$ref`'s siblings anyway)
            drops_beside=frozenset({"anyOf", "oneOf", "$ref"}),
            drops_beside_values=frozenset({"enum", "const"}),  # `type`, `maxLength`, `pattern`, `maximum`: dropped
            disjoint_one_of=True,
            escaped_names=False,
            ascii_names=False,
            raw_escaped_names="dry-run",
            # it ignores a lookahead ("not supported and is ignored") and refuses a lookbehind, a backreference
            # or `\b` ("not supported yet"): handed the pattern relaxed, the checker the rest; declared, so
            # auto ranks by it before compiling (it chose xgrammar over llguidance for a lookahead, saying
            # xgrammar enforced every keyword, while both left the pattern to the checker)
            unmatchable=LOOKAROUNDS | {"backreference", "word boundary", "non-word-boundary"},
            exclusive_groups=(
                frozenset({"pattern", "format"}),
                frozenset({"pattern", "minLength"}),
                frozenset({"pattern", "maxLength"}),
            ),
            required_listed=True,
            dropped_beside=(
                ("minLength", frozenset({"format"})),
                ("maxLength", frozenset({"format"})),
                # a closed range compiles a multipleOf only while small; any bound counts (conservative)
                ("multipleOf", frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})),
            ),
            integer_only=frozenset({"multipleOf"}),
            bounded_places=6,  # measured: `[1e-6, 2e-6]` takes 0.000001 and 0.000002 only, `[1e-7, 2e-7]` nothing
        ),
    )

    @staticmethod
    def pieces_for_xgrammar(vocab: Vocab) -> list[bytes]:
        """The byte pieces xgrammar is given.

        Special ids (stop ids included: xgrammar allows those by id where the grammar can
        end) and ids without bytes are given as b"", which xgrammar treats as special:
        never matched as text. A stop id given its bytes was also matched as text, so
        `<|im_end|>` or any 10 bytes of `.+` let the stop token through before the grammar
        could end (an empty output under `--regex '.+'`). Every other piece is given as it
        is, a NUL byte included: xgrammar 0.2.9 (the floor) matches `\\x00` against it, where
        a placeholder for pieces starting with NUL (once thought reserved) left NUL to no grammar.
        """
        stops = set(vocab.stop_ids)
        return [b"" if i in stops or i in vocab.special_ids else piece for i, piece in enumerate(vocab.tokens)]

    def tokenizer_info(self, vocab: Vocab):
        """xgrammar's view of `vocab`: exact bytes, specials hidden, EOS as stop."""
        import xgrammar as xgr

        encoded = self.pieces_for_xgrammar(vocab)
        try:
            return xgr.TokenizerInfo(
                encoded,
                xgr.VocabType.RAW,
                vocab_size=len(vocab),
                stop_token_ids=list(vocab.stop_ids),
                add_prefix_space=False,
            )
        except (RuntimeError, ValueError, TypeError) as exc:
            from sgcli.errors import UserError

            raise UserError(
                f"backend 'xgrammar' cannot use the vocabulary of tokenizer {vocab.source}: {exc}"
            ) from None

    def prepare(self, vocab: Vocab) -> None:
        self._compiler(vocab)

    def forget_compiles(self) -> None:
        for _, compiler in self._per_vocab.values():  # GrammarCompiler caches every grammar it compiled
            compiler.clear_cache()

    def _compiler(self, vocab: Vocab):
        import xgrammar as xgr

        return self.per_vocab(vocab, lambda: xgr.GrammarCompiler(self.tokenizer_info(vocab), max_threads=2))

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        compiler = self._compiler(vocab)
        t = time.perf_counter()
        # parsed once, before xgrammar sees it (a positioned error for malformed JSON), and kept for the warnings
        schema = spec.schema() if spec.kind is Kind.JSON_SCHEMA else None
        gaps = self._pattern_gaps(spec, schema)
        with capture_fd2() as native_log:
            try:
                handle = self._compile(compiler, spec, schema_text(spec, schema, gaps))
            except RuntimeError as exc:
                raise self._error(spec, schema, str(exc)) from None
            except UnicodeDecodeError:  # its message cut a character in two (`root ::= règle`): unreadable
                raise self._error(spec, schema, _UNREADABLE_MESSAGE) from None
        elapsed = time.perf_counter() - t
        warnings = self._warnings(spec, schema, native_log, gaps)
        return XGrammarCompiled(self.name, spec, vocab, elapsed, warnings, handle=handle)

    def schema_grammar(self, spec: ConstraintSpec) -> tuple[str, list[CompileWarning]]:
        """xgrammar's EBNF for a JSON Schema (`str(Grammar.from_json_schema(...))`), honouring its layout
        options, as `compile` hands it over (patterns it would write raw left out), and the warnings
        `compile` would give: a `$ref` it cannot resolve is only a line on stderr, printed as any value."""

        schema = spec.schema()  # positioned error for malformed JSON first
        gaps = self._pattern_gaps(spec, schema)
        with capture_fd2() as native_log:
            try:
                grammar = json_schema_grammar(schema_text(spec, schema, gaps), spec.json_options)
            except RuntimeError as exc:
                raise self._error(spec, schema, str(exc)) from None
        return str(grammar), self._warnings(spec, schema, native_log, gaps)

    def _warnings(self, spec: ConstraintSpec, schema, native_log: list[str], gaps) -> list[CompileWarning]:
        """What a compile (or a printed schema) weakened: xgrammar's log, each at its schema pointer,
        the patterns left to the checker, and sgcli's own rewrites."""
        warnings = compile_warnings(spec, native_log, schema=schema) + [g.warning() for g in gaps]
        if schema is not None and '"patternProperties"' in spec.text:
            warnings += name_pattern_warnings(schema)
        return warnings + lark_priority_warnings(spec) + structural_tag.layout_warnings(spec)

    def _pattern_gaps(self, spec: ConstraintSpec, schema) -> list[PatternGap]:
        """Patterns xgrammar would write raw (pattern_gaps): left out where sgcli's checker takes them."""
        return declared_pattern_gaps(spec, schema, self.name, self.capabilities.schema_keywords)

    def _error(self, spec: ConstraintSpec, schema, message: str) -> UserError:
        """xgrammar's error; for a JSON Schema, its "line, column" are in the EBNF it generated, not the file."""
        if schema is None:
            if spec.kind is Kind.REGEX:  # its "position N" counts in the rewritten regex
                message = _POSITION.sub(lambda m: f"position {original_offset(spec.text, int(m[1]) - 1) + 1}", message)
            elif spec.kind in (Kind.EBNF, Kind.LARK):  # its column counts UTF-8 bytes: `"😀😀" [b-a]` said 1:22
                message = _LINE_COL.sub(lambda m: _char_column(spec.text, m), message)
            return grammar_error(self.name, spec, message)
        from sgcli.backends.schema_warnings import paths_for

        text = native_message(message)
        return schema_error(self.name, spec, text, paths_for(schema, text))

    def _named_grammars(self, spec: ConstraintSpec) -> dict:
        """`@name` sub-grammars of a Lark grammar: JSON Schemas as xgrammar Grammars, Lark as text."""

        named = {}
        for name, sub in spec.subgrammars:
            if sub.kind is Kind.JSON_SCHEMA:
                named[name] = json_schema_grammar(sub.text, sub.json_options)
            elif sub.kind is Kind.LARK:  # its own inline %json laid out as the main grammar's are
                text, inline = _inline_json_named(sub, f"{name}_")
                named[name] = lark_for_xgrammar(for_backends(text)[0])
                named |= inline
            else:
                from sgcli.errors import UnsupportedError

                raise UnsupportedError("xgrammar", f"{sub.kind.label} sub-grammars (@{name})", ["llguidance"])
        return named

    def _compile(self, compiler, spec: ConstraintSpec, schema_text: str):
        import xgrammar as xgr

        kind = spec.kind
        if kind in (Kind.LARK, Kind.STRUCTURAL_TAG):
            self._refuse_raw_patterns(spec)
        if kind in (Kind.REGEX, Kind.LARK, Kind.STRUCTURAL_TAG):
            self._refuse_misread(spec)
        if kind is Kind.JSON_SCHEMA:  # parsed by `compile` first
            options = spec.json_options
            grammar = xgr.Grammar.from_json_schema(schema_text, **json_format_kwargs(options))
            return compile_json_safe(compiler, grammar, options.for_generation)
        if kind in (Kind.REGEX, Kind.CHOICE):
            return compiler.compile_regex(for_xgrammar(spec.as_regex()))
        if kind is Kind.EBNF:
            return compiler.compile_grammar(gbnf_for_xgrammar(spec.text), root_rule_name="root")
        if kind is Kind.LARK:
            as_written = lark_for_xgrammar(for_backends(spec.text)[0])
            try:
                text, inline = _inline_json_named(spec)
                if inline:
                    text = lark_for_xgrammar(for_backends(text)[0])
                    return compiler.compile_lark(text, named_grammars=self._named_grammars(spec) | inline)
            except Exception:  # noqa: BLE001 - said again from the text as written, where its positions are
                compiler.compile_lark(as_written, named_grammars=self._named_grammars(spec))
                raise  # a mistake only the rewritten grammar has: its own message
            return compiler.compile_lark(as_written, named_grammars=self._named_grammars(spec))
        if kind is Kind.STRUCTURAL_TAG:
            native = structural_tag.parse(spec)[0]
            tag = xgr.Grammar.from_structural_tag(tag_for_xgrammar(structural_tag.bounded_json_layout(native, spec)))
            return compile_json_safe(compiler, tag, spec.json_options.for_generation)  # a tag's JSON strings too
        raise AssertionError(f"xgrammar asked to compile {kind}")

    def _refuse_misread(self, spec: ConstraintSpec) -> None:
        """A regex piece xgrammar would read as something else and no spelling fixes (`misread`)."""
        if spec.kind is Kind.REGEX:
            pieces = [(0, spec.text)]
        elif spec.kind is Kind.LARK:
            pieces = [(start, spec.text[start:end]) for start, end in lark_regex_spans(spec.text)]
        else:
            pieces = [(None, p) for p in tag_regexes(structural_tag.parse(spec)[0])]
        for start, pattern in pieces:
            hit = misread(pattern)
            if hit is not None:
                at = None if start is None else offset_to_line_col(spec.text, start + hit[0])
                raise UserError(
                    f"{spec.kind.label} rejected by xgrammar: {hit[1]}"
                    + ("" if at is not None else f" (in the regex {pattern[:60]!r})"),
                    location=spec.where(*(at or (None, None))),
                    hint=hit[2],
                )

    def _refuse_raw_patterns(self, spec: ConstraintSpec) -> None:
        """A schema inside a grammar (`@name`, a structural tag's content) has no checker after it, so a
        pattern xgrammar would write raw (pattern_gaps) is refused there rather than left out."""
        from sgcli.dialects.embedded import embedded_schemas

        table = self.capabilities.schema_keywords
        for inner in embedded_schemas(spec):
            for gap in declared_pattern_gaps(inner.spec, inner.spec.schema(), self.name, table)[:1]:
                pointer = pointer_of(gap.path + ("pattern",))
                raise UserError(
                    f"{inner.label}: `pattern` at {pointer} {gap.why}; no checker follows a schema inside a grammar",
                    location=inner.location(pointer),
                    hint="llguidance escapes such characters (--backend llguidance)",
                )

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> XGrammarCompiled | None:
        import xgrammar as xgr

        t = time.perf_counter()
        try:
            handle = xgr.CompiledGrammar.deserialize_json(data.decode("utf-8"), self._cached_info(vocab))
        except Exception:  # stale version, other tokenizer, truncated file: the cache recompiles
            return None
        elapsed = time.perf_counter() - t
        return XGrammarCompiled(self.name, spec, vocab, elapsed, handle=handle)

    def _cached_info(self, vocab: Vocab):
        """The TokenizerInfo of this vocabulary's compiler (building one takes seconds, so share it)."""
        return self._compiler(vocab).compile_grammar('root ::= ""').tokenizer_info


def _inline_json_named(spec: ConstraintSpec, prefix: str = "") -> tuple[str, dict]:
    """A Lark grammar's text with each inline `%json` schema as a named sub-grammar compiled like a
    `--sub` schema, in the spec's JSON layout: xgrammar's own `%json` lays JSON out with any
    whitespace, whatever `--json-whitespace` says. Where sgcli cannot read the grammar, as it is.
    (The rewrite moves what follows a `%json` on its line, and joins a schema's lines: a compile
    error is said again from the text as written, `_compile`.)"""
    from sgcli.dialects.embedded import embedded_schemas

    text, named = spec.text, {}
    inline = [e for e in embedded_schemas(spec) if e.label.startswith("%json")]  # its own, not a sub-grammar's
    for n, found in enumerate(sorted(inline, key=lambda e: e.start, reverse=True)):
        keyword = text.rfind("%json", 0, found.start)
        name = f"sgcli_inline_json_{prefix}{n}"
        while f"@{name}" in spec.text or any(name == sub for sub, _ in spec.subgrammars):
            name += "_"
        named[name] = json_schema_grammar(found.spec.text, spec.json_options)
        text = text[:keyword] + f"@{name}" + text[found.start + len(found.spec.text) :]
    return text, named
