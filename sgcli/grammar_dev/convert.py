"""`sgcli convert`: between GBNF and Lark, and regex / JSON Schema to either, with a round-trip check.

Text dialects convert in `dialects/convert.py`; a JSON Schema is first turned into grammar text
by a backend's translator (xgrammar: llguidance and outlines-core print none).

The check compiles both grammars on every backend that takes both, and there feeds each
grammar strings the other accepts: random walks of the source's matcher over the
vocabulary, random walks of the converted grammar's, and the inputs of a grammar test
file (on which both must give the same verdict). A conversion passes when no string
tells the two apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sgcli.backends import get_backend
from sgcli.backends.bounded import CompileLimitError
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.conversions import json_schema_to_ebnf, printed_by
from sgcli.backends.matching import accepts_bytes, backends_for, first_mask_error, sample_strings
from sgcli.constraints.regex_dialects import RUST
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.convert import print_model, read_model, read_otherwise, target_of, without_lookaheads
from sgcli.errors import UserError
from sgcli.grammar_dev.grammar_tests import load_suite


def convert_spec(spec: ConstraintSpec, to: str) -> tuple[ConstraintSpec, list]:
    """The converted grammar as a spec of the target kind, and the schema keywords it does not enforce
    (`keyword_coverage` Gaps; none for a grammar source); a JSON Schema through a backend's EBNF."""
    target = target_of(spec, to)
    if spec.kind is not Kind.JSON_SCHEMA:
        return print_model(spec, read_model(spec), target), []
    (text, lost), origin = json_schema_to_ebnf(spec), f"{printed_by(spec)}'s EBNF for {spec.name}"
    grammar, text, origin = read_model(spec, text, origin)
    for rule in grammar.rules:  # its lookaheads only repeat what the JSON grammar makes follow
        rule.body = without_lookaheads(rule.body)
    # the translator prints its whole JSON library (basic_any, basic_object, ...) whether the schema
    # uses it or not: the rules the root never reaches are left out, so sgcli's own output lints clean
    reached = grammar.reached()
    grammar.rules = [rule for rule in grammar.rules if rule.name in reached]
    return print_model(spec, (grammar, text, origin), target), lost


def llama_cpp_refusals(target: ConstraintSpec) -> list[str]:
    """Why llama.cpp's GBNF parser would refuse a printed GBNF: left recursion the print could not unfold
    (through other rules; `dialects/left_recursion.py` unfolds a rule's own), as lint's G004 places it.
    xgrammar and llguidance read it, so the round trip cannot tell."""
    if target.kind is not Kind.EBNF:
        return []
    from sgcli.dialects.gbnf import parse_gbnf
    from sgcli.dialects.grammar_model import ParseError
    from sgcli.lint.structure import Structure

    try:
        grammar = parse_gbnf(target.text)
    except ParseError:  # the round trip's compiles say what is wrong with it
        return []
    found = Structure(grammar, target.text, target.name).left_recursion()
    return [f"{d.line}:{d.col}: {d.message} (G004)" for d in found]


SAMPLE_SECONDS = 15.0  # per backend and direction: the walks stop there, and the note says so


@dataclass
class RoundTrip:
    backends: list[str] = field(default_factory=list)  # where source and converted grammar were compared
    checked: dict[str, int] = field(default_factory=lambda: {"source samples": 0, "converted samples": 0, "cases": 0})
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # directions asked for samples that got none

    @property
    def ok(self) -> bool:
        return bool(self.backends) and not self.failures and sum(self.checked.values()) > 0 and not self.unchecked


Progress = Callable[[str, int, int], None]  # (stage, step, steps in the stage), as cli/progress.py draws it


def _compile_all(
    spec: ConstraintSpec, vocab, report: RoundTrip, role: str, only: str | None, progress: Progress, first=False
) -> dict:
    """Compile `spec` with every enforcing backend that supports it (or just `only`; with `first`, up to the
    first that compiles it); notes for those that cannot. Where every installed one refuses the source,
    it is bad input (`_unreadable`)."""

    compiled, refused = {}, {}
    names = [n for n in backends_for(spec) if only is None or n == only]
    for i, name in enumerate(names):
        impl = get_backend(name)
        missing = impl.unavailable_reason()
        if missing:
            if role == "source":  # once a round trip, not for each side
                report.notes.append(f"not checked on {name}: {missing}")
            continue
        progress(f"{name}: compiling the {role}", i, len(names))
        try:
            compiled[name] = compile_cached(impl, spec, vocab).compiled
        except CompileLimitError:
            raise  # a limit is the user's to raise (exit 2), not a note about the conversion
        except UserError as exc:
            refused[name] = exc
            report.notes.append(f"{role} not checked on {name}: it does not compile there: {exc.message}")
            continue
        if first:
            break
    if role == "source" and refused and not compiled and not _lark_reads(spec):
        raise _unreadable(spec, refused)
    return compiled


def _lark_reads(spec: ConstraintSpec) -> bool:
    """A Lark grammar the lark library itself reads is Lark all the same, though no backend takes it
    (templates: both refuse them, and converting expands them): it converts, NOT VERIFIED."""
    from sgcli.validation.lark_check import MAX_RULES, rule_count

    if spec.kind is not Kind.LARK or rule_count(spec.text) > MAX_RULES:  # past it, lark takes minutes to build
        return False
    import lark

    try:
        lark.Lark(spec.text, parser="earley", lexer="dynamic", regex=True)
    except Exception:  # noqa: BLE001 - lark raises GrammarError, UnexpectedInput, ...: it does not read it
        return False
    return True


def _unreadable(spec: ConstraintSpec, refused: dict[str, UserError]) -> UserError:
    """Exit 2 at the first backend's position: sgcli's own reader is kinder in places (`a{,3}`, Python's
    0 to 3, is an error to every backend), and a grammar printed from what nothing runs was reported
    as a failed round trip (exit 1)."""
    first = next(iter(refused.values()))
    others = "; ".join(f"{name}: {' '.join(exc.message.split())}" for name, exc in list(refused.items())[1:])
    return UserError(
        f"no backend reads this {spec.kind.label}: {first.message}",
        location=first.location,
        hint=(first.hint or "fix it there") + (f" ({others})" if others else ""),
    )


def refuse_unreadable(source: ConstraintSpec, only: str | None = None) -> None:
    """Without a round trip (--no-check), still exit 2 where no backend reads the source: compiled on the
    256-byte vocabulary lint uses, up to the first backend that takes it."""
    from sgcli.lint.runner import byte_vocab

    _compile_all(source, byte_vocab(), RoundTrip(), "source", only, lambda stage, i, n: None, first=True)


def round_trip(
    source: ConstraintSpec,
    target: ConstraintSpec,
    vocab,
    *,
    samples: int = 20,
    seed: int = 0,
    cases: list | None = None,
    only: str | None = None,
    progress: Progress | None = None,
) -> RoundTrip:
    """Check that `source` and `target` accept the same strings, as far as sampling can tell.

    Both grammars are compared on the same backend, for every backend that compiles both
    (or only on `only`: the backend whose translator printed a schema, since the text is its
    reading of the schema), so that a difference is the conversion's and not one backend
    disagreeing with another (that is what `sgcli test` and `compare-backends` are for).
    `progress(stage, step, steps)` hears of each compile, walk and case (the CLI draws it).
    """
    report = RoundTrip()
    step = progress or (lambda stage, i, n: None)
    sources = _compile_all(source, vocab, report, "source", only, step)
    targets = _compile_all(target, vocab, report, "converted grammar", only, step)
    report.backends = [name for name in sources if name in targets]
    if read_otherwise(source):
        other = [n for n in report.backends if get_backend(n).capabilities.regex_dialect != RUST]
        report.backends = [n for n in report.backends if n not in other]
        report.notes.extend(
            f"not compared on {name}: it reads this regex's `\\d`, `\\w`, `\\s` or `.` as ECMAScript does (ASCII "
            "digits and word characters), where the conversion follows Rust's reading (llguidance, outlines-core: "
            "Unicode's)"
            for name in other
        )
    if not report.backends:  # nothing compared: NOT VERIFIED, not a failure of the conversion
        report.notes.append(
            "no backend compiles both the source and the converted grammar "
            f"(source: {', '.join(sources) or 'none'}; converted: {', '.join(targets) or 'none'})"
        )
        return report

    def verdict(compiled, data: bytes):
        return accepts_bytes(compiled, data)

    for name in report.backends:
        src, tgt = sources[name], targets[name]
        stuck = {"source": first_mask_error(src), "converted": first_mask_error(tgt)}
        _report_stuck(report, name, stuck)
        for origin, walker, other, other_label in (
            ("source", src, tgt, "converted grammar"),
            ("converted", tgt, src, "source"),
        ):
            if stuck[origin] is not None:
                continue
            stage = f"{name}: {origin} samples"
            started = time.monotonic()
            found = sample_strings(
                walker, samples, seed=seed, seconds=SAMPLE_SECONDS, on_walk=lambda w, n, s=stage: step(s, n, samples)
            )
            if len(found) < samples and time.monotonic() - started >= SAMPLE_SECONDS:
                report.notes.append(
                    f"{name}: {origin} samples: {len(found)} of {samples} within {SAMPLE_SECONDS:g} s "
                    "(each walk of this grammar is slow: `sgcli bench` times its masks)"
                )
            for data in found:
                if not _is_text(data):  # a grammar's bytes that no decoder reads (xgrammar's surrogates): not text
                    continue
                report.checked[f"{origin} samples"] += 1
                got = verdict(other, data)
                if not got.accepted:
                    report.failures.append(
                        f"{name}: a {origin} sample is rejected by the {other_label} at "
                        f"byte {got.taken}: {_clip(data, got.taken)}"
                    )
        for i, case in enumerate(cases or []):
            step(f"{name}: test cases", i, len(cases))
            report.checked["cases"] += 1
            data = case.input.encode("utf-8")
            a, b = verdict(src, data), verdict(tgt, data)
            if a.accepted != b.accepted:
                refused = b if a.accepted else a  # marked where the grammar that refuses it stops
                report.failures.append(
                    f"{name}: case {case.index + 1} is {'accepted' if a.accepted else 'rejected'} by the source "
                    f"but {'accepted' if b.accepted else 'rejected'} by the converted grammar: "
                    f"{_clip(data, refused.taken)}"
                )
    if sum(report.checked.values()) == 0:
        report.notes.append("no sample strings found (random walks never ended) and no test cases given")
    elif samples and not report.failures:
        _note_unchecked_directions(report, samples)
    failed_on = {failure.split(":", 1)[0] for failure in report.failures if _STUCK not in failure}
    greedy = {name for name in report.backends if get_backend(name).capabilities.lexes_lark_greedily}
    lark = Kind.LARK in (source.kind, target.kind)  # the Lark side is the one read with a lexer
    if lark and failed_on and failed_on <= greedy and len(report.backends) > len(greedy):
        report.notes.append(
            f"only {', '.join(sorted(failed_on))} tells the two apart: it lexes Lark greedily, so a literal or "
            'terminal that another can continue takes what follows it (`x: "a" | "ab"` before `"bc"` refuses '
            f"`abc`; `sgcli lint` G012 names such lexemes); "
            f"{', '.join(b for b in report.backends if b not in greedy)} found no difference"
        )
    return report


_STUCK = "fails at its first mask"


def _note_unchecked_directions(report: RoundTrip, samples: int) -> None:
    """A direction whose walks gave no sample (a busy machine runs out of SAMPLE_SECONDS) compared
    nothing: the other direction's samples alone must not make the round trip ok."""
    for origin, other in (("source", "converted grammar"), ("converted", "source")):
        if report.checked[f"{origin} samples"] == 0:
            report.unchecked.append(origin)
            report.notes.append(
                f"round trip not checked in the {origin} -> {other} direction: no {origin} samples ({samples} "
                f"asked, walks stop after {SAMPLE_SECONDS:g} s on each of {', '.join(report.backends)}); rerun on "
                "an idle machine, or give --cases FILE whose inputs both grammars must agree on"
            )


def _report_stuck(report: RoundTrip, name: str, stuck: dict[str, str | None]) -> None:
    """A grammar that fails at its first mask where the other does not is a failure of the conversion
    on that backend; both failing is a note (nothing was compared there)."""
    labels = {"source": "source", "converted": "converted grammar"}
    if all(stuck.values()):
        report.notes.append(f"not compared on {name}: both grammars fail at their first mask: {stuck['source']}")
        return
    for origin, error in stuck.items():
        if error is not None:
            report.failures.append(f"{name}: the {labels[origin]} {_STUCK}: {error}")


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _clip(data: bytes, at: int, width: int = 30) -> str:
    """The bytes around offset `at`, with the character holding the offending byte marked by '⟨…⟩'
    (a multi-byte character whole: `⟨߆⟩`, not `⟨\\xdf⟩\\x86`)."""
    while 0 < at < len(data) and data[at] & 0xC0 == 0x80:  # back to the character's first byte
        at -= 1
    end = at + 1
    while end < len(data) and end - at < 4 and data[end] & 0xC0 == 0x80:
        end += 1
    start = max(0, at - width)
    head = ("…" if start else "") + _shown(data[start:at])
    tail = _shown(data[end : end + width // 2]) + ("…" if end + width // 2 < len(data) else "")
    return head + (f"⟨{_shown(data[at:end])}⟩" if at < len(data) else "⟨end⟩") + tail


def _shown(data: bytes) -> str:
    """Text as it reads: printable characters as they are, others escaped once (`\\n`, `\\x08`), and a
    byte that is no UTF-8 as `\\xNN`."""
    out = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(ch if ch.isprintable() else repr(ch)[1:-1])
    return "".join(out)


def sibling_cases(path: str | None) -> tuple[str | None, list]:
    """Cases of `<stem>.test.yaml` beside a grammar file, when there is one."""
    from pathlib import Path

    if not path or path.startswith("<") or path.startswith("@"):
        return None, []
    p = Path(path)
    candidate = p.with_name(p.name.split(".")[0] + ".test.yaml")
    if not candidate.is_file():
        return None, []
    return str(candidate), load_suite(str(candidate)).cases
