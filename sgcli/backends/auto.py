"""`--backend auto`: try backends in a fixed order, fall back loudly.

The order comes from measurement, not habit. On JSON-Schema-Test-Suite draft2020-12
(383 schemas, 1299 instances, SmolLM2 tokenizer; benchmarks/json_schema_suite.py, summary
committed in benchmarks/results/json_schema_suite.json):

  backend        compiled   accepted-invalid (of which without a warning)   rejected-valid
  llguidance     169/383      0   (0)                                         22
  xgrammar       359/383    300 (202)                                         54
  outlines_core  120/383     12   (0)                                         59

and, on real-world schemas (the issue's survey), llguidance compiled 80% and never accepted
a forbidden instance, xgrammar 98% with warnings for what it weakened, outlines-core 67%,
slowly. Hence:

1. llguidance: what it compiles it enforces; a keyword it cannot enforce is a compile
   error, never a silent weakening.
2. xgrammar: compiles the most, but weakens some keywords; its own warnings (allOf, oneOf,
   pattern + length, lookaround) are turned into warnings at the schema's JSON pointer.
3. outlines_core: regular languages only, compiles the fewest and slowest; sgcli warns
   about every keyword it drops.

A backend is skipped when it lacks the capability (kind or JSON option), is not
installed, or rejects the constraint; every skip is reported as {backend, reason}. A compile
that runs into --compile-timeout or --compile-memory is not a rejection: it ends the run
with exit 2 naming the flag, so a busy machine never picks the backend.
"""

from __future__ import annotations

from collections.abc import Iterator

from sgcli.backends.base import Backend, Compiled
from sgcli.backends.bounded import CompileLimitError
from sgcli.backends.compile_cache import compile_cached
from sgcli.constraints.spec import ConstraintSpec
from sgcli.errors import UserError

AUTO_ORDER = ("llguidance", "xgrammar", "outlines_core")
NOT_USABLE = "not usable: "  # the reason of a backend skipped because it is not installed


def _one_line(error: UserError) -> str:
    where = f"{error.location}: " if error.location and (error.location.line or error.location.path) else ""
    return where + " ".join(error.message.split())


def candidates(spec: ConstraintSpec, skipped: list[dict]) -> Iterator[Backend]:
    """The backends `auto` compiles `spec` with, in AUTO_ORDER: every one that has the capability and
    is installed. Each one passed over is appended to `skipped` as {backend, reason} before the next
    is yielded. The one choice `generate` makes and `lint` judges."""
    from sgcli.backends import get_backend, unsupported_reason

    for name in AUTO_ORDER:
        backend = get_backend(name)
        lacking = unsupported_reason(backend, spec)
        if lacking is not None:
            skipped.append({"backend": name, "reason": f"does not support {lacking}"})
            continue
        missing = backend.unavailable_reason()
        if missing:
            skipped.append({"backend": name, "reason": NOT_USABLE + missing})
            continue
        yield backend


def compile_auto(spec: ConstraintSpec, vocab, compile_one=None) -> tuple[Compiled, list[dict]]:
    """(the first successful compilation of `candidates`, [{backend, reason}] for each skipped one).
    `compile_one(backend)` compiles (default: through the grammar cache, bounded)."""
    fallbacks: list[dict] = []
    first_error: UserError | None = None
    for backend in candidates(spec, fallbacks):
        try:
            compiled = compile_one(backend) if compile_one else compile_cached(backend, spec, vocab).compiled
            return compiled, fallbacks
        except CompileLimitError:
            raise  # a limit is not a refusal: on a busy machine the next backend would be chosen by load
        except UserError as exc:
            first_error = first_error or exc
            fallbacks.append({"backend": backend.name, "reason": _one_line(exc)})
    tried = "; ".join(f"{f['backend']}: {f['reason']}" for f in fallbacks)
    if first_error is None:
        raise UserError(f"no backend can run this {spec.kind.label} constraint", hint=f"tried {tried}")
    raise UserError(first_error.message, location=first_error.location, hint=f"every backend failed ({tried})")
