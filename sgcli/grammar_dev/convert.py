"""`sgcli convert`: GBNF -> Lark, regex -> EBNF, JSON Schema -> EBNF, with a round-trip check.

The check compiles both grammars on every backend that takes both, and there feeds each
grammar strings the other accepts: random walks of the source's matcher over the
vocabulary, random walks of the converted grammar's, and the inputs of a grammar test
file (on which both must give the same verdict). A conversion passes when no string
tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

TARGETS = {"lark": Kind.LARK, "ebnf": Kind.EBNF}


def _gbnf_to_lark(spec: ConstraintSpec) -> str:
    from sgcli.grammar_dev.gbnf_to_lark import convert

    return convert(spec.text, spec.origin)


def _regex_to_ebnf(spec: ConstraintSpec) -> str:
    from sgcli.backends.conversions import regex_to_ebnf

    return regex_to_ebnf(spec)


def _schema_to_ebnf(spec: ConstraintSpec) -> str:
    from sgcli.backends.conversions import json_schema_to_ebnf

    return json_schema_to_ebnf(spec)


CONVERTERS = {
    (Kind.EBNF, Kind.LARK): _gbnf_to_lark,
    (Kind.REGEX, Kind.EBNF): _regex_to_ebnf,
    (Kind.CHOICE, Kind.EBNF): _regex_to_ebnf,
    (Kind.JSON_SCHEMA, Kind.EBNF): _schema_to_ebnf,
}


def convert_spec(spec: ConstraintSpec, to: str) -> ConstraintSpec:
    """The converted grammar as a spec of the target kind."""
    target = TARGETS.get(to.lower())
    if target is None:
        raise UserError(f"cannot convert to '{to}'", hint="--to lark or --to ebnf")
    converter = CONVERTERS.get((spec.kind, target))
    if converter is None:
        known = ", ".join(f"{a.label} -> {b.label}" for a, b in CONVERTERS)
        raise UserError(f"no conversion from {spec.kind.label} to {target.label}", hint=f"available: {known}")
    return ConstraintSpec(target, converter(spec), f"{spec.name} (as {target.label})")


@dataclass
class RoundTrip:
    backends: list[str] = field(default_factory=list)  # where source and converted grammar were compared
    checked: dict[str, int] = field(default_factory=lambda: {"source samples": 0, "converted samples": 0, "cases": 0})
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.backends) and not self.failures and sum(self.checked.values()) > 0


def _compile_all(spec: ConstraintSpec, vocab, report: RoundTrip, role: str) -> dict:
    """Compile `spec` with every enforcing backend that supports it; notes for those that cannot."""
    from sgcli.backends import get_backend
    from sgcli.backends.bounded import CompileLimitError
    from sgcli.cache.grammars import compile_cached
    from sgcli.grammar_dev.matching import backends_for

    compiled = {}
    for name in backends_for(spec):
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
) -> RoundTrip:
    """Check that `source` and `target` accept the same strings, as far as sampling can tell.

    Both grammars are compared on the same backend, for every backend that compiles both,
    so that a difference is the conversion's and not one backend disagreeing with another
    (that is what `sgcli test` and `compare-backends` are for).
    """
    from sgcli.grammar_dev.matching import accepts_bytes, sample_strings

    report = RoundTrip()
    sources = _compile_all(source, vocab, report, "source")
    targets = _compile_all(target, vocab, report, "converted grammar")
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
