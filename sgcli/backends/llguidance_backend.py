"""llguidance adapter: Earley parser + lazy lexer, token masks computed on the fly.

Its tokenizer is built from sgcli's `Vocab` (exact bytes per id, special ids, every stop
id as an EOS), never from decoded text. llguidance reports grammar errors as matcher
state, not exceptions; this adapter turns them into positioned `UserError`s.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sgcli.backends.base import (
    Capabilities,
    Compiled,
    CompileWarning,
    LibraryBackend,
    SchemaKeywords,
    lark_priority_warnings,
)
from sgcli.backends.diagnostics import (
    diagnose_llguidance,
    escaped_regex_offset,
    native_message,
    positioned_error,
    regex_place,
    schema_error,
)
from sgcli.backends.llguidance_grammar import inline_json_options, schema_entry, schema_grammar
from sgcli.backends.native_stderr import capture_fd2
from sgcli.backends.pattern_gaps import PatternGap, at, declared_pattern_gaps
from sgcli.backends.schema_warnings import compile_warnings
from sgcli.backends.unsatisfiable import left_out, unsatisfiable_pointer
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.regex_dialects import without_verbose
from sgcli.constraints.spec import ConstraintSpec, Kind, parse_json
from sgcli.dialects.convert import one_char_lexemes
from sgcli.dialects.lark_backends import for_backends
from sgcli.dialects.regex_parse import LOOKAROUNDS
from sgcli.errors import Location, UserError, offset_to_line_col
from sgcli.tokenizers.vocab import Vocab

if TYPE_CHECKING:
    import llguidance as llg
    import numpy as np


# `format` values its grammar enforces (benchmarks/keyword_positions.py)
LLGUIDANCE_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
)


class LLGuidanceMatcher:
    def __init__(self, prototype, gbnf: bool = False):
        self._m = prototype.deep_copy()
        self._gbnf = gbnf

    @property
    def error(self) -> str | None:
        if not self._m.is_error():
            return None
        message = diagnose_llguidance(self._m.get_error()).message
        if self._gbnf and "Too many items" in message:  # its hint is about lexemes the user did not choose
            message = message.split("; try avoiding")[0] + (
                f" (GBNF is read one character a lexeme here, {GBNF_STEP_ITEMS:,} items a step: the grammar is "
                "ambiguous, see `sgcli lint` G006; --backend xgrammar reads GBNF as written)"
            )
        return message

    def fill_mask(self, bitmask: np.ndarray) -> None:
        assert bitmask.dtype == "int32" and bitmask.flags.c_contiguous
        self._m.unsafe_compute_mask_ptr(bitmask.ctypes.data, bitmask.nbytes)

    def mask_bytes(self) -> bytes:
        """The next mask as `fill_mask` writes it, without numpy (lint's first step)."""
        return self._m.compute_bitmask()

    def accept(self, token_id: int) -> bool:
        return self._m.consume_token(token_id)

    def rollback(self, n: int) -> None:
        self._m.rollback(n)

    def jump_forward(self) -> bytes:
        return self._m.compute_ff_bytes()

    def is_terminated(self) -> bool:
        return self._m.is_stopped()

    def can_stop(self) -> bool:
        return self._m.is_accepting()


@dataclass(eq=False)
class LLGuidanceCompiled(Compiled):
    prototype: llg.LLMatcher = field(kw_only=True)  # each matcher is a deep copy of it

    def matcher(self) -> LLGuidanceMatcher:
        return LLGuidanceMatcher(self.prototype, gbnf=self.spec.kind is Kind.EBNF)

    def _mask_bytes(self, matcher: LLGuidanceMatcher) -> bytes:
        return matcher.mask_bytes()


# GBNF reaches llguidance as one-character lexemes (`_gbnf`), which multiply the Earley items a mask
# step makes: on transformers-CFG's SMILES grammar (G006) 50,000, its default, ran out after 26 tokens;
# 200,000 took the 129 tokens tried, the slowest mask 30 ms (xgrammar's were 30-70 ms there).
GBNF_STEP_ITEMS = 200_000


def _limits(spec: ConstraintSpec):
    import llguidance as llg

    return llg.LLParserLimits(step_max_items=GBNF_STEP_ITEMS) if spec.kind is Kind.EBNF else None


class _VocabTokenizer:
    """What `llguidance.TokenizerWrapper` reads: bytes per id, special ids, EOS, an encoder."""

    def __init__(self, vocab: Vocab):
        self.tokens = vocab.tokens
        self.special_token_ids = sorted(vocab.special_ids)
        self.eos_token_id = vocab.eos_id if vocab.eos_id is not None else (vocab.stop_ids or (None,))[0]
        self.bos_token_id = vocab.bos_id
        self._encode = vocab.encode or _greedy_encoder(vocab)

    def __call__(self, text):
        if not isinstance(text, str):  # tells TokenizerWrapper to pass str, so no bytes are lost to decoding
            raise TypeError("str expected")
        return self._encode(text)


def _greedy_encoder(vocab: Vocab):
    """Longest-match tokenization, for vocabularies loaded without their encoder."""

    def encode(text: str) -> list[int]:
        ids = vocab.longest_match(text.encode("utf-8"))
        if ids is None:
            raise ValueError(f"some byte of {text!r} has no token")
        return ids

    return encode


# llguidance's emptiness check gives up on some patterns beside a length ("Unable to determine if regex
# is empty: (And (SearchRegex /P/) (Regex /(?s:.{1,512})/))": an unanchored search under a long
# `maxLength`, a cfn-lint IAM path) and refuses the whole schema. Its regexes are written `/.../`.
_UNDECIDED = "Unable to determine if regex is empty"
_SLASHED = re.compile(r"/((?:\\.|[^/\\])*)/")
_RETRIES = 8  # compiles after the first, each leaving out what the last one's error named


def _without_impossible(message: str, schema) -> tuple[object, list[str]] | None:
    """`schema` with the branches and optional properties that can only hold the subschema llguidance
    calls unsatisfiable made `false` (`backends/unsatisfiable.py`), and their pointers; None: nothing."""
    pointer = unsatisfiable_pointer(message)
    return None if pointer is None or schema is None else left_out(schema, pointer)


def _undecided_patterns(message: str, schema, known: list[PatternGap]) -> list[PatternGap]:
    """The patterns llguidance's error `message` says it cannot decide beside a length, those not in
    `known`: each is left out of its grammar, which keeps the length (so the string stays bounded),
    and sgcli's schema checker enforces the pattern."""
    if _UNDECIDED not in message or not isinstance(schema, dict):
        return []
    from sgcli.backends.schema_warnings import pattern_paths

    done = {u.path for u in known}
    found = []
    for body in _SLASHED.findall(message):
        for regex in {body, body.replace("\\/", "/")}:
            for path in pattern_paths(schema, regex):
                if path[-1] != "pattern" or path[:-1] in done:
                    continue  # a patternProperties key, or one already out
                if not {"minLength", "maxLength"} & set(at(schema, path[:-1])):
                    continue  # no length beside it: not what llguidance gave up on
                done.add(path[:-1])
                why = f'beside a length is one llguidance cannot decide ("{_UNDECIDED}")'
                found.append(PatternGap(path[:-1], why, None))
    return found


class LLGuidanceBackend(LibraryBackend):
    module = "llguidance"
    distribution = "llguidance"
    name = "llguidance"
    description = "llguidance: Earley parser with a lazy lexer, masks computed per token (Guidance, llama.cpp, vLLM)"
    capabilities = Capabilities(
        kinds=frozenset(
            {Kind.JSON_SCHEMA, Kind.REGEX, Kind.EBNF, Kind.LARK, Kind.CHOICE, Kind.STRUCTURAL_TAG, Kind.LLGUIDANCE}
        ),
        json_options=frozenset({"compact", "whitespace_pattern", "max_whitespace", "strict_properties"}),
        notes="Lark in its dialect (%json, @name sub-grammars, %llguidance); GBNF as sgcli prints it "
        "(one-character lexemes); --max-whitespace as a whitespace regex; no --indent",
        jump_forward=True,
        compiles_in_process=True,
        lexes_lark_greedily=True,
        # measured: benchmarks/keyword_positions.py and JSON-Schema-Test-Suite draft2020-12 (no invalid
        # instance accepted). Compiled lenient (`llguidance_grammar.schema_entry`): a keyword it does not implement is
        # dropped with a warning, and, unlisted here, is a gap sgcli's schema checker enforces
        schema_keywords=SchemaKeywords(
            enforced=frozenset(
                {"type", "enum", "const", "pattern", "minLength", "maxLength", "format"}
                | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
                | {"items", "prefixItems", "minItems", "maxItems"}
                | {"properties", "patternProperties", "required", "additionalProperties"}
                | {"minProperties", "maxProperties", "anyOf", "allOf", "oneOf", "$ref"}
            ),
            through=frozenset({"properties", "patternProperties", "additionalProperties", "items", "prefixItems"})
            | {"anyOf", "oneOf", "allOf", "$ref"},
            formats=LLGUIDANCE_FORMATS,
            # 2023-02-29, second 60; a hostname past 253 characters (2026-12-06)
            approximate_formats=frozenset({"date", "date-time", "time", "hostname"}),
            raw_escaped_names="dry-run-or-control",
            counts_all_required=True,  # its compile warns: "min/maxProperties only supported when all keys..."
            # its regexes are DFAs over bytes: look-around, backreferences and `\b` relaxed (pattern_gaps)
            unmatchable=LOOKAROUNDS | {"backreference", "word boundary", "non-word-boundary"},
            negated_escapes=True,
            decimal_bounds=True,
            wide_shorthands=frozenset("DWS"),  # `\\W` took "ۿ" (U+06FF), `\\D` "٠" (U+0660), `\\S` U+001F
            rust_classes=True,  # `^[a-z&&[^aeiou]]+$` took "wlkkq", `^[[:upper:]]{2,3}$` took "CCC" (2026-12-06)
        ),
    )

    def prepare(self, vocab: Vocab) -> None:
        self.tokenizer(vocab)

    def tokenizer(self, vocab: Vocab):
        """The `LLTokenizer` for `vocab`, built once per Vocab object."""
        import llguidance as llg

        return self.per_vocab(
            vocab,
            lambda: llg.LLTokenizer(
                llg.TokenizerWrapper(_VocabTokenizer(vocab)), n_vocab=len(vocab), eos_token=list(vocab.stop_ids) or None
            ),
        )

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        import llguidance as llg

        tok = self.tokenizer(vocab)
        t = time.perf_counter()
        schema = spec.schema() if spec.kind is Kind.JSON_SCHEMA else None  # once: grammar, error, warnings
        unmatchable = declared_pattern_gaps(spec, schema, self.name, self.capabilities.schema_keywords)
        grammar = self.grammar(spec, tok, schema=schema, unmatchable=unmatchable)
        with capture_fd2() as native_log:
            # errors are state; no stderr noise while decoding. Its error and warnings are those of
            # validate_grammar_with_warnings (the same on all 383 suite schemas), which would compile twice.
            prototype = llg.LLMatcher(tok, grammar, log_level=0, limits=_limits(spec))
            compiled_schema, impossible = schema, []  # the schema less what no instance can take
            for _ in range(_RETRIES if schema is not None else 0):
                if not prototype.is_error():
                    break
                more = _undecided_patterns(prototype.get_error(), schema, unmatchable)
                pruned = _without_impossible(prototype.get_error(), compiled_schema)
                if more:
                    unmatchable = unmatchable + more
                elif pruned is not None:
                    compiled_schema, places = pruned
                    impossible += places
                elif any(u.relaxed is not None for u in unmatchable):  # a relaxed one it still cannot read
                    unmatchable = [replace(u, relaxed=None) for u in unmatchable]
                else:
                    break
                grammar = self.grammar(
                    spec, tok, schema=compiled_schema, unmatchable=unmatchable, as_written=compiled_schema is schema
                )
                prototype = llg.LLMatcher(tok, grammar, log_level=0)
        if prototype.is_error():
            raise self._error(spec, prototype.get_error(), schema)
        elapsed = time.perf_counter() - t
        messages = prototype.get_grammar_warnings() + native_log
        warnings = self._warnings(spec, messages, schema) if messages else []
        warnings += [u.warning() for u in unmatchable]  # gaps sgcli's schema checker takes
        if impossible:  # no pointer: the schema's instances are the same, nothing is left to the checker
            shown = ", ".join(impossible[:4]) + (f" (and {len(impossible) - 4} more)" if len(impossible) > 4 else "")
            warnings.append(
                CompileWarning(
                    f"compiled with {shown} made false: llguidance finds no value they could hold, so the "
                    "schema's instances are the same"
                )
            )
        note = dialect_of(schema).note
        if note:
            warnings.append(CompileWarning(note))
        warnings += lark_priority_warnings(spec)
        return LLGuidanceCompiled(self.name, spec, vocab, elapsed, warnings, grammar, prototype=prototype)

    # ---- building the grammar ----

    def grammar(self, spec: ConstraintSpec, tok=None, *, schema=None, unmatchable=None, as_written=True) -> str:
        """The llguidance grammar (Lark text or top-level grammar JSON) for `spec` (`schema`: its
        parsed JSON Schema, and `unmatchable`: its patterns llguidance cannot match, when the caller
        has them; `as_written`: False where `schema` is a rewritten copy of it)."""
        import llguidance as llg

        kind = spec.kind
        if kind is Kind.JSON_SCHEMA:
            schema = spec.schema() if schema is None else schema
            if unmatchable is None:
                unmatchable = declared_pattern_gaps(spec, schema, self.name, self.capabilities.schema_keywords)
            return schema_grammar(spec, schema, unmatchable, as_written=as_written)
        if kind is Kind.REGEX:
            return llg.LLMatcher.grammar_from_regex(without_verbose(spec.text))
        if kind is Kind.CHOICE:
            return "start: " + " | ".join(json.dumps(c) for c in spec.choices) + "\n"
        if kind is Kind.EBNF:
            return self._gbnf(spec)
        if kind is Kind.LARK:
            if spec.subgrammars:
                return self._composite(spec, tok)
            return for_backends(inline_json_options(spec))[0]
        if kind is Kind.LLGUIDANCE:
            doc = parse_json(spec.text, spec.origin)
            if not isinstance(doc, dict) or not isinstance(doc.get("grammars"), list):
                raise UserError(
                    'an llguidance grammar file must be a JSON object {"grammars": [...]}',
                    location=Location(spec.origin),
                    hint="see llguidance's TopLevelGrammar format",
                )
            return spec.text
        if kind is Kind.STRUCTURAL_TAG:
            from sgcli.backends import structural_tag

            _, triggered = structural_tag.parse(spec)
            if triggered is None:
                raise UserError(
                    "structural tags other than triggered_tags are not supported by llguidance",
                    location=Location(spec.origin),
                    hint="xgrammar takes every structural-tag format (--backend xgrammar)",
                )
            return structural_tag.to_lark(spec, triggered, self.name)
        raise AssertionError(f"llguidance asked to compile {kind}")

    def _gbnf(self, spec: ConstraintSpec) -> str:
        """GBNF as Lark of one-character lexemes (`dialects.convert.one_char_lexemes`), not through
        llguidance's own converter, whose lexemes change the language under its greedy lexer."""
        try:
            return one_char_lexemes(spec)[0]
        except UserError as exc:  # a name that does not resolve, or xgrammar's lookahead: at its place
            message = f"{spec.kind.label} rejected by {self.name}: {exc.message}"
            raise UserError(message, location=exc.location, hint=exc.hint) from None

    def _composite(self, spec: ConstraintSpec, tok) -> str:
        """A Lark grammar plus named sub-grammars it refers to as `@name`: llguidance's top-level JSON."""
        import llguidance as llg

        grammars = [{"name": "start", "lark_grammar": for_backends(inline_json_options(spec))[0]}]
        for name, sub in spec.subgrammars:
            if sub.kind not in (Kind.JSON_SCHEMA, Kind.LARK, Kind.REGEX, Kind.CHOICE, Kind.EBNF):
                raise UserError(
                    f"sub-grammar @{name}: {sub.kind.label} cannot be a sub-grammar",
                    hint="use a JSON Schema, Lark, GBNF, regex or choice",
                )
            if sub.kind is Kind.JSON_SCHEMA:
                entry = schema_entry(sub)
            else:
                entry = {"lark_grammar": self._lark_of(sub)}
            # validate alone first, so an error points into the sub-grammar's own file
            is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(json.dumps({"grammars": [entry]}), tok)
            if is_error:
                raise self._error(sub, messages[0])
            grammars.append({"name": name, **entry})
        return json.dumps({"grammars": grammars})

    def _lark_of(self, spec: ConstraintSpec) -> str:
        if spec.kind is Kind.REGEX:
            import llguidance as llg

            return "start: /" + llg.regex_to_lark(without_verbose(spec.text), "") + "/\n"
        if spec.kind is Kind.EBNF:
            return self._gbnf(spec)
        return self.grammar(spec)

    # ---- errors and warnings ----

    def _error(self, spec: ConstraintSpec, message: str, schema=None) -> UserError:
        d = diagnose_llguidance(message)
        if spec.kind is Kind.JSON_SCHEMA:
            from sgcli.backends.schema_warnings import paths_for, pattern_paths

            if schema is None:
                schema = spec.schema()
            # a regex it built from a number's bounds is in no `pattern`: then the message's own rule places it
            paths = (pattern_paths(schema, d.regex) if d.regex is not None else []) or paths_for(schema, d.message)
            return schema_error(self.name, spec, d.message, paths)
        line, col = d.line, d.col
        if spec.kind is Kind.REGEX:  # llguidance's line:col is of the Lark it made from the regex
            shown = None if d.regex_offset is None else escaped_regex_offset(spec.text, d.regex_offset)
            line, col = (None, None) if shown is None else regex_place(spec.text, shown)
        elif spec.kind is Kind.EBNF and line is not None:  # a line of the printed Lark is one rule
            positions = one_char_lexemes(spec)[1]
            at = positions[line - 1] if 0 < line <= len(positions) else None
            line, col = offset_to_line_col(spec.text, at) if at is not None else (None, None)
        elif spec.kind is Kind.STRUCTURAL_TAG:
            line = col = None  # positions refer to the generated Lark, not the user's file
        elif spec.kind is Kind.LARK and line is None:
            ref = d.message.removeprefix("unknown grammar ")
            if ref != d.message and ref in spec.text:
                line, col = offset_to_line_col(spec.text, spec.text.index(ref))
            elif d.message.startswith("no start rule"):  # about the whole file: at 1:1, as xgrammar and G007 place it
                line, col = 1, 1
        return positioned_error(self.name, spec, d.message, line=line, col=col)

    @staticmethod
    def _warnings(spec: ConstraintSpec, messages: list[str], schema=None) -> list[CompileWarning]:
        return compile_warnings(spec, messages, lambda m: diagnose_llguidance(native_message(m)).message, schema)
