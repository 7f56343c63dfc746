"""What sgcli does about the keywords a grammar leaves unenforced (`keyword_coverage` finds them): refuse
what nothing enforces with one exit-2 error naming each keyword at file:line:col, or, with
`--allow-unenforced`, go on and list them for the record and the user (`Guarantee`).

Why apart from `keyword_coverage`: that module reads schemas and backends' declarations into gaps;
this one turns gaps into the user's answer, locally (grammar + checker) and for a serving engine
(whose answers only the checker judges).
"""

from __future__ import annotations

from dataclasses import dataclass

from sgcli.backends.keyword_coverage import Gap, compiled_gaps, unchecked, unjudged_gaps
from sgcli.errors import Location, UserError


@dataclass
class Guarantee:
    """What enforces each keyword of a compiled schema, for the record and the user."""

    weakened: list[dict]  # every keyword the grammar does not enforce ({pointer, keyword, backend})
    unenforced: list[dict]  # those nothing enforces (only with --allow-unenforced: else an error)
    notes: list[str]  # for humans: what the checker takes over, what nothing enforces


def guarantee(compiled, *, allow_unenforced: bool = False) -> Guarantee:
    """The keywords `compiled` leaves unenforced; a UserError (exit 2, before any model loads) naming
    each keyword nothing enforces, at file:line:col, unless `allow_unenforced`."""
    gaps = compiled_gaps(compiled)
    nothing = unchecked(gaps)
    if nothing and not allow_unenforced:
        raise unenforced_error(compiled.spec, compiled.backend, nothing)
    notes = []
    checked = [g for g in gaps if g.checker]
    if checked:
        notes.append(
            f"{compiled.backend} does not enforce {len(checked)} keyword(s); sgcli's schema checker enforces "
            "them while decoding: " + ", ".join(g.describe() for g in checked)
        )
    if nothing:
        notes.append(
            f"--allow-unenforced: nothing enforces {len(nothing)} keyword(s), listed in the record's "
            "`unenforced`: " + ", ".join(g.describe() for g in nothing)
        )
    return Guarantee([g.record() for g in gaps], [g.record() for g in nothing], notes)


def where(spec, gap: Gap) -> Location:
    """file:line:col of a gap's keyword in the schema text (in the file around it, for a schema inside a grammar)."""
    if gap.embedded is not None:
        return gap.embedded.location(gap.pointer)
    return spec.place_key(gap.pointer)


def unenforced_error(spec, backend: str, gaps: list[Gap]) -> UserError:
    return _refusal(
        spec,
        gaps,
        f"would be enforced by nothing, neither {backend}'s grammar nor sgcli's schema checker",
        lambda g: f"{g.reason} by {backend}, and {g.why_not_checked or 'the checker cannot'}",
        "choose a backend that enforces it (sgcli lint names them per backend)",
    )


def printed_weaker_error(spec, backend: str, gaps: list[Gap]) -> UserError:
    """A JSON Schema printed as grammar text keeps only what the translator's grammar enforces: a grammar
    file carries no schema checker, so each of `gaps` would be lost without a word."""
    return _refusal(
        spec,
        gaps,
        f"would not be enforced by the grammar {backend}'s translator prints (a grammar file carries no "
        "schema checker)",
        lambda g: f"{g.reason} by {backend}",
        "keep the schema itself (generate --schema enforces it with sgcli's checker)",
        anyway="to convert anyway",
    )


def _refusal(spec, gaps: list[Gap], what: str, why, instead: str, anyway: str = "") -> UserError:
    """The exit-2 error naming each keyword of `gaps` at file:line:col, `why(gap)` for each."""
    lines = [f"{where(spec, g)}: {g.describe()}: {why(g)}" for g in gaps]
    anyway = anyway or "to generate anyway (the record then lists them under `unenforced`)"
    return UserError(
        f"{len(gaps)} schema keyword(s) {what}:\n  " + "\n  ".join(lines),
        location=where(spec, gaps[0]),
        hint=f"rewrite or drop the keyword, {instead}, or pass --allow-unenforced {anyway}",
    )


def server_guarantee(spec, engine: str, *, allow_unenforced: bool = False) -> Guarantee:
    """What sgcli cannot check in `engine`'s answers to `spec`: a UserError (exit 2, before any request)
    naming each keyword at file:line:col, unless `allow_unenforced`; then the record's `unenforced`."""
    nothing = unjudged_gaps(spec, engine)
    if nothing and not allow_unenforced:
        raise _refusal(
            spec,
            nothing,
            f"cannot be checked in {engine}'s answers: sgcli's schema checker, which validates each answer, "
            "cannot judge them, whatever the server's grammar enforces",
            lambda g: g.why_not_checked or g.reason,
            "generate locally with a backend whose grammar enforces it (--engine local; sgcli lint names them)",
        )
    notes = []
    if nothing:
        notes.append(
            f"--allow-unenforced: sgcli's schema checker cannot judge {len(nothing)} keyword(s) in {engine}'s "
            "answers (only the server's grammar may enforce them), listed in the record's `unenforced`: "
            + ", ".join(g.describe() for g in nothing)
        )
    return Guarantee([], [g.record() for g in nothing], notes)
