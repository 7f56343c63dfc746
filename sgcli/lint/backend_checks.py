"""What the backends themselves say: S001 (rejected), S002 (warned), J002, and R001's verdicts.

Each chosen backend compiles the file through the one protocol
(`check_supports(name, spec).compile(spec, vocab)`); a compile error is a positioned
`UserError`, a warning a `CompileWarning` (with a JSON pointer for schemas). Nothing
here knows a backend by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from sgcli.backends import check_supports
from sgcli.backends.base import PRIORITIES_LEFT_OUT, Compiled, CompileWarning
from sgcli.backends.bounded import CompileLimitError
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.diagnostics import native_message
from sgcli.backends.matching import first_mask_error
from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.jsonpos import SchemaText
from sgcli.constraints.spec import ConstraintSpec, Kind, parse_json
from sgcli.dialects.grammar_model import Lit, walk
from sgcli.dialects.regex_parse import RegexFeature
from sgcli.errors import UserError, line_col_to_offset, offset_to_line_col
from sgcli.lint.diagnostic import Diagnostic, at_offset

_REGEX_POSITION = re.compile(r"at position (\d+)")
_WRAPPER = re.compile(r"^.*? rejected by \S+: ")  # sgcli's own "EBNF rejected by xgrammar: "
_POSITION = re.compile(r"^[\w /]*error at line \d+, column \d+: ", re.I)  # the diagnostic carries it


@dataclass
class BackendCompile:
    """One backend's compile of one file."""

    name: str
    compiled: Compiled | None = None
    error: UserError | None = None
    warnings: list[CompileWarning] = field(default_factory=list)


def compile_with(name: str, spec: ConstraintSpec, vocab, *, first_mask: bool = False) -> BackendCompile:
    """One backend's compile; `first_mask` (a real tokenizer's vocabulary) also fills its first mask, where
    a matcher that compiled may fail (llguidance's item limit): numpy, which lint otherwise never loads."""

    backend = check_supports(name, spec)
    try:
        compiled = compile_cached(backend, spec, vocab).compiled
    except CompileLimitError:
        raise  # a limit is not a finding about the file: the file fails with exit 2
    except UserError as exc:
        return BackendCompile(name, error=exc)
    failed = first_mask_error(compiled) if first_mask else None
    if failed is not None:  # it compiled, but its matcher fails before the first token: a rejection in effect
        return BackendCompile(name, error=UserError(f"its matcher fails at the first step: {failed}"))
    return BackendCompile(name, compiled, warnings=list(compiled.warnings))


def clean_message(message: str) -> str:
    """The backend's own words, without sgcli's 'X rejected by Y:' wrapper, a position the
    diagnostic already carries, native log prefixes, or code excerpts after the first line."""
    text = _POSITION.sub("", native_message(_WRAPPER.sub("", message.strip(), count=1)), count=1)
    first = text.split("\n")[0].strip()
    return first or text


def compile_error(run: BackendCompile, spec: ConstraintSpec, stext) -> Diagnostic:
    """S001, or J002 when a schema error sits on a keyword of the schema."""
    loc = run.error.location
    line, col = in_bundle(spec, loc)
    detail = clean_message(run.error.message)
    if loc is not None and loc.path and loc.path != spec.origin and line is None:  # not copied into the bundle
        message, hint = f"{run.name} rejects it: {detail}", run.error.hint
        return Diagnostic("S001", message, loc.path, loc.line, loc.col, hint=hint, backend=run.name)
    if line is None:
        line, col = _quoted_position(detail, spec.text)
    if spec.kind is Kind.JSON_SCHEMA and stext is not None and line is not None:
        keyword_path = _keyword_at(stext, line, col)
        if keyword_path is not None:
            start, end = stext.key_span(keyword_path)
            return at_offset(
                "J002",
                spec.text,
                spec.name,
                start,
                end,
                f"{run.name} does not implement `{keyword_path[-1]}`: {detail}",
                hint="drop or rewrite the keyword, or use a backend that supports it",
                backend=run.name,
            )
    return Diagnostic(
        "S001", f"{run.name} rejects it: {detail}", spec.name, line, col, hint=run.error.hint, backend=run.name
    )


_QUOTED = re.compile(r'"([^"\n]{3,})"')


def in_bundle(spec: ConstraintSpec, loc) -> tuple[int | None, int | None]:
    """A backend error's line:col in `spec.text`, where lint's findings are placed until
    `inputs.in_their_files` moves them back: the error is placed in the file the user wrote, and a
    schema bundled from several files (`schema_bundle`) holds that place elsewhere, or a rewritten
    `$ref` earlier on its line moved its column."""
    if loc is None or loc.line is None:
        return None, None
    placed = spec.source_map.in_text(loc) if spec.source_map is not None else None
    if placed is not None:
        return placed
    return (loc.line, loc.col) if loc.path in (spec.origin, None) else (None, None)  # None: another file's


def _quoted_position(detail: str, text: str) -> tuple[int | None, int | None]:
    """Where a backend's message without a position quotes a piece of the file found there once
    (llguidance: 'invalid regex "[z-a]"'): that piece's line:col, else none."""
    for piece in _QUOTED.findall(detail):
        if text.count(piece) == 1:
            return offset_to_line_col(text, text.index(piece))
    return None, None


MAX_DROPPED = 8


def without_refused(run: BackendCompile, spec: ConstraintSpec, stext, vocab) -> tuple[Compiled | None, list[tuple]]:
    """(the backend's compile of the schema minus every keyword it refuses (J002), the dropped
    keyword paths); (None, ...) when an error is not about a keyword or too many are refused."""
    import json

    error, schema, dropped = run.error, json.loads(spec.text), []
    while error is not None and len(dropped) < MAX_DROPPED:
        line, col = in_bundle(spec, error.location)
        path = _keyword_at(stext, line, col) if line else None
        if path is None or path in dropped:
            return None, dropped
        node = schema
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]
        dropped.append(path)
        text = json.dumps(schema, indent=2, ensure_ascii=False)
        stext = SchemaText(text)
        spec = replace(spec, text=text, source_map=None)  # the text compiled now, whose positions are its own
        again = compile_with(run.name, spec, vocab)
        if again.compiled is not None:
            return again.compiled, dropped
        error = again.error
    return None, dropped


def _keyword_at(stext, line: int, col: int | None) -> tuple | None:
    """The schema path of a keyword whose value starts at line:col, if that is one."""

    pointer = stext.pointer_at(line_col_to_offset(stext.text, line, col or 1))
    if not pointer:
        return None
    subschema_paths = {path for path, _ in iter_subschemas(parse_json(stext.text, None))}
    path = stext.path_of(pointer)
    return path if path[:-1] in subschema_paths else None


def warning(run: BackendCompile, w: CompileWarning, spec: ConstraintSpec, stext) -> Diagnostic:
    """S002 at the schema location the warning is about (its JSON pointer, or the first
    place its words point to), or at a regex position the message gives."""
    message = f"{run.name} warns: {clean_message(w.message)}"
    pointer = w.pointer
    if stext is not None and pointer is None:
        from sgcli.backends.schema_warnings import pointers_for

        pointer = next(iter(pointers_for(spec.schema(), w.message)), None)
    if stext is not None and pointer is not None:
        span = stext.key_span(stext.path_of(pointer))
        if f"(at {pointer or '/'})" not in message:
            message += f" (at {pointer or '/'})"
        if span is not None:
            return at_offset("S002", spec.text, spec.name, span[0], span[1], message, backend=run.name)
    position = _REGEX_POSITION.search(w.message)
    if spec.kind is Kind.REGEX and position and "\n" not in spec.text:
        return Diagnostic(
            "S002", message, spec.name, 1, min(int(position.group(1)), max(len(spec.text), 1)), backend=run.name
        )
    span = _first_priority(spec) if PRIORITIES_LEFT_OUT in w.message else None
    if span is not None:  # at the first priority left out (a warning about the text: no pointer, no regex offset)
        return at_offset("S002", spec.text, spec.name, span[0], span[1], message, backend=run.name)
    return Diagnostic("S002", message, spec.name, backend=run.name)


def _first_priority(spec: ConstraintSpec) -> tuple[int, int] | None:
    """Where the first rule or terminal priority (`A.2:`) of a Lark grammar is written."""
    from sgcli.dialects.grammar_model import ParseError
    from sgcli.dialects.lark import parse_lark

    if spec.kind is not Kind.LARK:
        return None
    try:
        spans = parse_lark(spec.text).priority_spans
    except ParseError:
        return None
    return min(spans) if spans else None


def neutralized(spec: ConstraintSpec, features: list[RegexFeature]) -> ConstraintSpec:
    """The same file with every regex feature cut out, to test whether they caused a
    backend's error or warning."""
    text = spec.text
    for f in sorted(features, key=lambda f: f.pos, reverse=True):
        text = text[: f.pos] + text[f.end :]
    return replace(spec, text=text)


def feature_verdicts(
    runs: list[BackendCompile], spec: ConstraintSpec, features: list[RegexFeature], vocab
) -> dict[str, str]:
    """For each backend: "rejects", "ignores" (it warned) or "" (no complaint), judged by
    compiling the file again without the features. Runs whose error or warnings the
    features explain are cleared, so the finding is reported once, as R001."""
    if not features:
        return {}
    plain = neutralized(spec, features)
    verdicts = {}
    for run in runs:
        again = compile_with(run.name, plain, vocab)
        if run.error is not None:
            if again.error is None:
                verdicts[run.name] = "rejects"
                run.error = None
        elif len(again.warnings) < len(run.warnings):
            verdicts[run.name] = "ignores"
            kept = {w.message for w in again.warnings}
            run.warnings = [w for w in run.warnings if w.message in kept]
        else:
            verdicts[run.name] = ""
    return verdicts


def feature_diagnostics(
    spec: ConstraintSpec, features: list[RegexFeature], verdicts: dict[str, str]
) -> list[Diagnostic]:
    rejecting = [n for n, v in verdicts.items() if v == "rejects"]
    ignoring = [n for n, v in verdicts.items() if v == "ignores"]
    silent = [n for n, v in verdicts.items() if v == ""]
    parts = []
    if rejecting:
        parts.append("rejected by " + ", ".join(rejecting))
    if ignoring:
        parts.append("ignored (with a warning) by " + ", ".join(ignoring))
    if silent:
        parts.append("compiled without complaint by " + ", ".join(silent) + " (check what it matches)")
    tail = "; " + "; ".join(parts) if parts else ""
    return [
        at_offset(
            "R001",
            spec.text,
            spec.name,
            f.pos,
            f.end,
            f"{f.what} `{f.source}` cannot be expressed by a token automaton{tail}",
            hint="spell the cases out with alternatives, or check this part after generation",
        )
        for f in features
    ]


def special_token_literals(spec: ConstraintSpec, grammar, vocab, tokenizer_name: str) -> list[Diagnostic]:
    """T001: grammar literals containing the text of a special token."""
    specials = {}
    for i in sorted(vocab.special_ids):
        piece = vocab.tokens[i].decode("utf-8", errors="replace") if i < len(vocab.tokens) else ""
        if len(piece) >= 2:
            specials.setdefault(piece, i)
    out = []
    for rule in grammar.rules:
        for node in walk(rule.body):
            if not isinstance(node, Lit) or len(node.text) < 2:
                continue
            for piece, token_id in specials.items():
                if piece in node.text:
                    how = "is" if piece == node.text else "contains"
                    out.append(
                        at_offset(
                            "T001",
                            spec.text,
                            spec.name,
                            node.pos,
                            _literal_end(spec.text, node.pos),
                            f"literal {how} the special token {piece} (id {token_id}) of {tokenizer_name}: "
                            f"backends match it as ordinary text, so the model cannot use its real "
                            f"special token here",
                            hint="end on the stop token instead, or use a syntax for special tokens "
                            "(llguidance Lark: <|name|>)",
                        )
                    )
                    break
    return out


def _literal_end(text: str, pos: int) -> int | None:
    """End of a string literal starting at `pos` (a quote), for the underline."""
    if pos >= len(text) or text[pos] != '"':
        return None
    i = pos + 1
    while i < len(text) and text[i] not in '"\n':
        i += 2 if text[i] == "\\" else 1
    return i + 1
