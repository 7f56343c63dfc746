"""Compiles that cannot take the process down: a time and a memory ceiling on every compile.

Every compile in every command goes through `compile_bounded`. It first compiles in a forked
child under RLIMIT_AS (`sgcli.limits.run_bounded`), which the parent kills when
`--compile-timeout` passes; only when the child finished in time does the parent compile (fork
shares every warm per-vocabulary structure, and a compile is deterministic, so the second one is
bounded by the first). Measurements and the trade-off: docs/limits.md.
"""

from __future__ import annotations

import threading

from sgcli.constraints.spec import ConstraintSpec, Kind, check_size
from sgcli.errors import UserError
from sgcli.limits import LimitHit, Limits, current_limits, run_bounded

# A fork copies only the forking thread: a library lock held by another thread at that moment
# stays locked forever in the child. Bounded compiles are therefore one at a time per process.
_compile_lock = threading.RLock()


class CompileLimitError(UserError):
    """A compile ran into a limit: exit 2 naming the limit and the flag that raises it."""

    def __init__(self, message: str, flag: str):
        super().__init__(
            f"{message}; the compile was stopped",
            hint=f"raise the limit with {flag} (0 turns it off), or simplify the constraint",
        )
        self.flag = flag


def compile_bounded(backend, spec: ConstraintSpec, vocab):
    """`backend.compile(spec, vocab)` under the current limits; a limit is a CompileLimitError."""
    limits = current_limits()
    check_size(spec, limits)
    if spec.kind is Kind.NONE or not (limits.timeout_s or limits.memory_mb):
        return backend.compile(spec, vocab)

    backend.prepare(vocab)

    def probe():
        try:
            backend.compile(spec, vocab)
        except UserError:
            pass  # the parent compiles again and raises the positioned error itself
        return None

    with _compile_lock:  # no other thread of ours is inside a grammar library when we fork
        try:
            run_bounded(probe, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
        except LimitHit as hit:
            if hit.kind != "raised":
                raise _limit_error(hit, backend.name, spec, limits) from None
        return backend.compile(spec, vocab)  # a Python exception in the child happens again here, traceback and all


def _limit_error(hit: LimitHit, backend_name: str, spec: ConstraintSpec, limits: Limits) -> UserError:
    what = f"compiling the {spec.kind.label}" + (f" of {spec.origin}" if spec.origin else "") + f" with {backend_name}"
    if hit.kind == "time":
        return CompileLimitError(f"{what} took longer than the {limits.timeout_s:g} s time limit", "--compile-timeout")
    if hit.kind == "memory":
        return CompileLimitError(f"{what} needed more than the {limits.memory_mb} MB memory limit", "--compile-memory")
    return UserError(
        f"{what} crashed the grammar library" + (f": {hit.detail}" if hit.detail else ""),
        hint="a bug in the grammar library, not in your constraint alone; try another --backend",
    )
