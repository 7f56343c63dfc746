"""`sgcli convert`: between GBNF and Lark, and regex / JSON Schema to either, with a round-trip check.

Every conversion reads the source with sgcli's one reader per dialect (positions kept) into
the grammar model and prints it (grammar_dev/printers.py); a JSON Schema is first turned into
grammar text by a backend's translator (xgrammar: llguidance and outlines-core print none).

The check compiles both grammars on every backend that takes both, and there feeds each
grammar strings the other accepts: random walks of the source's matcher over the
vocabulary, random walks of the converted grammar's, and the inputs of a grammar test
file (on which both must give the same verdict). A conversion passes when no string
tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import Location, UserError, offset_to_line_col

TARGETS = {"lark": "lark", "gbnf": "gbnf", "ebnf": "gbnf"}
_KINDS = {"lark": Kind.LARK, "gbnf": Kind.EBNF}
# What structure findings make a grammar unprintable (every backend rejects it too).
_FATAL = ("G001", "G003", "G007")


def to_lark(text: str, dialect: str = "gbnf", origin: str | None = None) -> str:
    """Lark text for a grammar in `dialect` ("gbnf"/"ebnf", "regex"); the Lark library can load it.

    The public entry point for re-parsing outputs with an independent parser (lark).
    Raises a positioned UserError for what Lark cannot express."""
    kind = {"gbnf": Kind.EBNF, "ebnf": Kind.EBNF, "regex": Kind.REGEX}.get(dialect)
    if kind is None:
        raise UserError(f"to_lark: unknown source dialect '{dialect}'", hint="gbnf, ebnf or regex")
    return convert_spec(ConstraintSpec(kind, text, origin), "lark").text


def convert_spec(spec: ConstraintSpec, to: str) -> ConstraintSpec:
    """The converted grammar as a spec of the target kind (read with positions, printed from the model)."""
    from sgcli.grammar_dev.printers import Printer

    target = TARGETS.get(to.lower())
    if target is None:
        raise UserError(f"cannot convert to '{to}'", hint="--to lark or --to gbnf")
    if spec.kind is Kind.LARK and target == "lark":
        raise UserError(f"{spec.name} is Lark already", hint="--to gbnf")
    grammar, text, origin = _model(spec)
    printed = Printer(grammar, target, text, origin).grammar()
    return ConstraintSpec(_KINDS[target], printed, f"{spec.name} (as {_KINDS[target].label})")


def _model(spec: ConstraintSpec):
    """(grammar model, the text its positions refer to, that text's name) for any convertible kind."""
    from sgcli.lint.grammar_model import Grammar, ParseError, Rule

    text, origin = spec.text, spec.origin
    try:
        if spec.kind is Kind.EBNF:
            from sgcli.lint.gbnf import parse_gbnf

            grammar = parse_gbnf(text)
        elif spec.kind is Kind.LARK:
            from sgcli.lint.lark import parse_lark

            grammar = parse_lark(text)
            _refuse_lark_only(grammar, text, origin)
        elif spec.kind in (Kind.REGEX, Kind.CHOICE):
            from sgcli.lint.regex_parse import parse_regex

            text = spec.as_regex()
            parsed = parse_regex(text)
            _refuse_features(parsed.features, text, origin)
            grammar = Grammar("regex", "root", [Rule("root", parsed.node, 0)])
        elif spec.kind is Kind.JSON_SCHEMA:
            from sgcli.backends.conversions import json_schema_to_ebnf, printed_by
            from sgcli.lint.gbnf import parse_gbnf

            text, origin = json_schema_to_ebnf(spec), f"{printed_by(spec)}'s EBNF for {spec.name}"
            grammar = parse_gbnf(text)
            for rule in grammar.rules:  # its lookaheads only repeat what the JSON grammar makes follow
                rule.body = _without_lookaheads(rule.body)
        else:
            raise UserError(f"no conversion from {spec.kind.label}", hint="convert GBNF, Lark, regex or JSON Schema")
    except ParseError as exc:
        raise UserError(
            f"cannot read this {spec.kind.label}: {exc.message}", location=_at(text, exc.pos, origin)
        ) from None
    _refuse_structure(grammar, text, origin)
    return grammar, text, origin


def _at(text: str, pos: int, origin: str | None) -> Location:
    return Location(origin, *offset_to_line_col(text, pos))


def _refuse_structure(grammar, text: str, origin: str | None) -> None:
    from sgcli.lint.structure import Structure

    found = sorted(
        (d for d in Structure(grammar, text, origin or "").run() if d.code in _FATAL), key=lambda d: (d.line, d.col)
    )
    if found:
        d = found[0]
        raise UserError(f"{d.message} ({d.code})", location=Location(origin, d.line, d.col), hint=d.hint)


def _refuse_features(features, text: str, origin: str | None) -> None:
    if features:
        f = features[0]
        raise UserError(
            f"a regex {f.what} ({f.source}) has no equivalent in a grammar",
            location=_at(text, f.pos, origin),
            hint="spell the alternatives out without it",
        )


def _refuse_lark_only(grammar, text: str, origin: str | None) -> None:
    """Lark's lexer directives have no GBNF equivalent: say so at the directive."""
    _refuse_features(grammar.regex_features, text, origin)
    if grammar.ignores:
        raise UserError(
            "%ignore (tokens skipped between all others) has no equivalent in GBNF",
            location=_at(text, text.find("%ignore"), origin),
            hint="write the whitespace into the rules where it may appear",
        )
    if grammar.external:
        name = sorted(grammar.external)[0]
        where = max(text.find("%import"), text.find("%declare"), 0)
        raise UserError(
            f"`{name}` comes from %import/%declare or a template, which GBNF has no equivalent for",
            location=_at(text, where, origin),
            hint=f"define `{name}` in the grammar itself",
        )


def _without_lookaheads(node):
    from sgcli.lint.grammar_model import Alt, Lit, Opaque, Rep, Seq

    if isinstance(node, Opaque) and node.what == "lookahead":
        return Lit(node.pos, "")
    if isinstance(node, Seq):
        node.items = [_without_lookaheads(i) for i in node.items]
    elif isinstance(node, Alt):
        node.alts = [_without_lookaheads(a) for a in node.alts]
    elif isinstance(node, Rep):
        node.body = _without_lookaheads(node.body)
    return node


@dataclass
class RoundTrip:
    backends: list[str] = field(default_factory=list)  # where source and converted grammar were compared
    checked: dict[str, int] = field(default_factory=lambda: {"source samples": 0, "converted samples": 0, "cases": 0})
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.backends) and not self.failures and sum(self.checked.values()) > 0


def _compile_all(spec: ConstraintSpec, vocab, report: RoundTrip, role: str, only: str | None = None) -> dict:
    """Compile `spec` with every enforcing backend that supports it (or just `only`); notes for those that cannot."""
    from sgcli.backends import get_backend
    from sgcli.backends.bounded import CompileLimitError
    from sgcli.cache.grammars import compile_cached
    from sgcli.grammar_dev.matching import backends_for

    compiled = {}
    for name in backends_for(spec):
        if only is not None and name != only:
            continue
        impl = get_backend(name)
        if impl.unavailable_reason():
            continue
        try:
            compiled[name] = compile_cached(impl, spec, vocab).compiled
        except CompileLimitError:
            raise  # a limit is the user's to raise (exit 2), not a note about the conversion
        except UserError as exc:
            report.notes.append(f"{role} not checked on {name}: it does not compile there: {exc.message}")
    return compiled


def round_trip(
    source: ConstraintSpec,
    target: ConstraintSpec,
    vocab,
    *,
    samples: int = 20,
    seed: int = 0,
    cases: list | None = None,
    only: str | None = None,
) -> RoundTrip:
    """Check that `source` and `target` accept the same strings, as far as sampling can tell.

    Both grammars are compared on the same backend, for every backend that compiles both
    (or only on `only`: the backend whose translator printed a schema, since the text is its
    reading of the schema), so that a difference is the conversion's and not one backend
    disagreeing with another (that is what `sgcli test` and `compare-backends` are for).
    """
    from sgcli.grammar_dev.matching import accepts_bytes, sample_strings

    report = RoundTrip()
    sources = _compile_all(source, vocab, report, "source", only)
    targets = _compile_all(target, vocab, report, "converted grammar", only)
    report.backends = [name for name in sources if name in targets]
    if not report.backends:
        report.failures.append(
            "no backend compiles both the source and the converted grammar "
            f"(source: {', '.join(sources) or 'none'}; converted: {', '.join(targets) or 'none'})"
        )
        return report

    def verdict(compiled, data: bytes):
        return accepts_bytes(compiled, data)

    for name in report.backends:
        src, tgt = sources[name], targets[name]
        for origin, walker, other, other_label in (
            ("source", src, tgt, "converted grammar"),
            ("converted", tgt, src, "source"),
        ):
            for data in sample_strings(walker, samples, seed=seed):
                report.checked[f"{origin} samples"] += 1
                got = verdict(other, data)
                if not got.accepted:
                    report.failures.append(
                        f"{name}: a {origin} sample is rejected by the {other_label} at "
                        f"byte {got.taken}: {_clip(data, got.taken)}"
                    )
        for case in cases or []:
            report.checked["cases"] += 1
            data = case.input.encode("utf-8")
            a, b = verdict(src, data).accepted, verdict(tgt, data).accepted
            if a != b:
                report.failures.append(
                    f"{name}: case {case.index + 1} is {'accepted' if a else 'rejected'} by the source "
                    f"but {'accepted' if b else 'rejected'} by the converted grammar: {_clip(data, 0)}"
                )
    if sum(report.checked.values()) == 0:
        report.notes.append("no sample strings found (random walks never ended) and no test cases given")
    return report


def _clip(data: bytes, at: int, width: int = 30) -> str:
    """The bytes around offset `at`, with the offending byte marked by '⟨…⟩'."""

    def show(b: bytes) -> str:
        return repr(b.decode("utf-8", errors="backslashreplace"))[1:-1]

    start = max(0, at - width)
    head = ("…" if start else "") + show(data[start:at])
    tail = show(data[at + 1 : at + 1 + width // 2]) + ("…" if at + 1 + width // 2 < len(data) else "")
    return head + (f"⟨{show(data[at : at + 1])}⟩" if at < len(data) else "⟨end⟩") + tail


def sibling_cases(path: str | None) -> tuple[str | None, list]:
    """Cases of `<stem>.test.yaml` beside a grammar file, when there is one."""
    from pathlib import Path

    from sgcli.grammar_dev.grammar_tests import load_suite

    if not path or path.startswith("<") or path.startswith("@"):
        return None, []
    p = Path(path)
    candidate = p.with_name(p.name.split(".")[0] + ".test.yaml")
    if not candidate.is_file():
        return None, []
    return str(candidate), load_suite(str(candidate)).cases
