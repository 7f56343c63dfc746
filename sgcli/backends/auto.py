"""`--backend auto`: the backend that leaves the fewest keywords unenforced, falling back loudly.

Measured on JSON-Schema-Test-Suite draft2020-12 (383 schemas, 1299 instances, SmolLM2 tokenizer;
benchmarks/json_schema_suite.py, summary committed in benchmarks/results/json_schema_suite.json):

  backend        compiled   accepted-invalid: bare grammar (named) / through sgcli's checker   rejected-valid
  llguidance     344/383    210 (210) / 0                                                       23
  xgrammar       359/383    300 (300) / 0                                                       54
  outlines_core  120/383     12  (12) / 0                                                       59

llguidance, compiled lenient, drops what it does not implement (uniqueItems, not, if/then/else, ...)
with a warning and enforces the rest; xgrammar leaves more keywords unenforced (and drops some
silently, each named by sgcli's tables); outlines-core drops every keyword but the
first of each subschema and compiles slowly. Each backend declares which keywords it enforces
(`Capabilities.schema_keywords`, keyword_coverage.py; the `pattern`s its grammar relaxes or leaves out
too, pattern_gaps.declared_pattern_gaps), so before compiling anything `auto` ranks the backends that
can run the spec: fewest keywords enforced by nothing, then fewest left to sgcli's
schema checker, then the fixed order below. It compiles them in that order and takes the first that
compiles; every backend passed over is reported as {backend, reason}.
A compile that runs into --compile-timeout or --compile-memory is not a refusal: it ends the run
with exit 2 naming the flag, so a busy machine never picks the backend.
"""

from __future__ import annotations

from collections.abc import Iterator

from sgcli.backends.base import Backend, Compiled
from sgcli.backends.bounded import CompileLimitError
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.keyword_coverage import schema_gaps
from sgcli.constraints.spec import ConstraintSpec
from sgcli.errors import ConstraintError, UserError

AUTO_ORDER = ("llguidance", "xgrammar", "outlines_core")
NOT_USABLE = "not usable: "  # the reason of a backend skipped because it is not installed


def _one_line(error: UserError) -> str:
    where = f"{error.location}: " if error.location and (error.location.line or error.location.path) else ""
    return where + " ".join(error.message.split())


def _leaves(gaps) -> str:
    unchecked = [g for g in gaps if not g.checker]
    parts = []
    if unchecked:
        parts.append(f"{len(unchecked)} keyword(s) enforced by nothing ({_listed(unchecked)})")
    checked = [g for g in gaps if g.checker]
    if checked:
        parts.append(f"{len(checked)} keyword(s) to sgcli's schema checker ({_listed(checked)})")
    return "leaves " + " and ".join(parts) if parts else "enforces every keyword"


def _listed(gaps, most: int = 3) -> str:
    shown = ", ".join(f"{g.keyword} at {g.pointer}" for g in gaps[:most])
    return shown + (f", +{len(gaps) - most} more" if len(gaps) > most else "")


def ranked(spec: ConstraintSpec) -> list[tuple[str, list]]:
    """(backend, its gaps) in the order `auto` tries them: fewest unenforced keywords first. Ranked by
    the grammar `generate` compiles, so a dry run (`masks`, `test`) picks the backend generation would:
    a dry run's grammar reads more spellings, which can leave more to the checker (raw_escaped_names)."""
    gaps = {name: schema_gaps(spec, name) for name in AUTO_ORDER}
    generating = spec.for_generation()
    judged = gaps if generating == spec else {name: schema_gaps(generating, name) for name in AUTO_ORDER}

    def rank(name: str) -> tuple:
        found = judged[name]
        return (sum(not g.checker for g in found), len(found), AUTO_ORDER.index(name))

    return [(name, gaps[name]) for name in sorted(AUTO_ORDER, key=rank)]


def candidates(spec: ConstraintSpec, skipped: list[dict]) -> Iterator[tuple[Backend, list, list]]:
    """(backend, its keyword gaps, the ranked order after it) for each backend `auto` compiles `spec`
    with, in the ranked order: every one that has the capability and is installed. Each one passed
    over is appended to `skipped` as {backend, reason} before the next is yielded. The one choice
    `generate` makes and `lint` judges."""
    from sgcli.backends import get_backend, unsupported_reason

    order = ranked(spec)
    for position, (name, gaps) in enumerate(order):
        backend = get_backend(name)
        lacking = unsupported_reason(backend, spec)
        if lacking is not None:
            skipped.append({"backend": name, "reason": f"does not support {lacking}"})
            continue
        missing = backend.unavailable_reason()
        if missing:
            skipped.append({"backend": name, "reason": NOT_USABLE + missing})
            continue
        yield backend, gaps, order[position + 1 :]


def compile_auto(spec: ConstraintSpec, vocab, compile_one=None) -> tuple[Compiled, list[dict]]:
    """(the first successful compilation of `candidates`, [{backend, reason}] for each backend passed
    over). `compile_one(backend)` compiles (default: through the grammar cache, bounded)."""
    fallbacks: list[dict] = []
    first_error: UserError | None = None
    for backend, gaps, rest in candidates(spec, fallbacks):
        name = backend.name
        try:
            compiled = compile_one(backend) if compile_one else compile_cached(backend, spec, vocab).compiled
        except (CompileLimitError, ConstraintError):
            raise  # a limit is not a refusal (on a busy machine the next backend would be chosen by load); a
            # mistake in the constraint is the same on the next backend
        except UserError as exc:
            first_error = first_error or exc
            fallbacks.append({"backend": name, "reason": _one_line(exc)})
            continue
        for other, other_gaps in rest:
            if AUTO_ORDER.index(other) < AUTO_ORDER.index(name):  # would have come first by the fixed order
                fallbacks.append(
                    {"backend": other, "reason": f"not tried: it {_leaves(other_gaps)}; {name} {_leaves(gaps)}"}
                )
        return compiled, fallbacks
    tried = "; ".join(f"{f['backend']}: {f['reason']}" for f in fallbacks)
    if first_error is None:
        raise UserError(f"no backend can run this {spec.kind.label} constraint", hint=f"tried {tried}")
    raise UserError(first_error.message, location=first_error.location, hint=f"every backend failed ({tried})")
