"""Backend registry: names -> adapters, loaded lazily so `--help` and `lint` stay fast.

The CLI and engine only ever go through these functions; they never branch on a
backend's name.
"""

from __future__ import annotations

import importlib

from sgcli.backends.base import Backend, Capabilities, Compiled, CompileWarning, Matcher
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.schema_checker import with_checker
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UnsupportedError, UserError, did_you_mean

# Fixed order: also the order `sgcli backends` prints and `--backend auto` tries.
_ADAPTERS = {
    "llguidance": "sgcli.backends.llguidance_backend:LLGuidanceBackend",
    "xgrammar": "sgcli.backends.xgrammar_backend:XGrammarBackend",
    "outlines_core": "sgcli.backends.outlines_backend:OutlinesCoreBackend",
    "none": "sgcli.backends.none_backend:NoneBackend",
}
# The names vLLM (--structured-outputs-config.backend: guidance, outlines, xgrammar) and SGLang
# (--grammar-backend: llguidance, outlines, xgrammar) give the same libraries, and the pip name.
_ALIASES = {"guidance": "llguidance", "outlines": "outlines_core", "outlines-core": "outlines_core"}
_instances: dict[str, Backend] = {}

__all__ = [
    "Backend",
    "Capabilities",
    "Compiled",
    "CompileWarning",
    "Matcher",
    "backend_names",
    "canonical_name",
    "get_backend",
    "known_names",
    "check_supports",
    "DEFAULT_BACKEND",
    "enforces",
]

# `auto` tries llguidance first (it refuses what it cannot enforce), then falls back loudly:
# see sgcli/backends/auto.py for the measurements behind the order.
DEFAULT_BACKEND = "auto"  # the one place the default is named; commands take it from here


def backend_names() -> list[str]:
    return list(_ADAPTERS)


def known_names() -> list[str]:
    """Every name `--backend` takes: the registered ones, then their aliases."""
    return [*_ADAPTERS, *_ALIASES]


def canonical_name(name: str) -> str:
    """The registered name of `name` (an alias as vLLM or SGLang spell it), or `name` itself."""
    return _ALIASES.get(name, name)


def get_backend(name: str) -> Backend:
    name = canonical_name(name)
    if name not in _ADAPTERS:
        raise UserError(
            f"unknown backend '{name}'." + did_you_mean(name, known_names()),
            hint="choose one of: " + ", ".join(_ADAPTERS),
        )
    if name not in _instances:
        module, cls = _ADAPTERS[name].split(":")
        _instances[name] = getattr(importlib.import_module(module), cls)()
    return _instances[name]


def listed_unavailable_reason(backend: Backend) -> str | None:
    """`backend.unavailable_reason()` for listings (`sgcli backends`): where the library's module can be
    found (importlib.util.find_spec) it is not imported, because importing xgrammar imports torch
    (seconds). A library that is found but fails to import is reported when a command uses it."""
    import importlib.util

    module = getattr(backend, "module", None)
    if module is not None and importlib.util.find_spec(module) is not None:
        return backend.too_old()  # from the installed metadata, without importing the library
    return backend.unavailable_reason()  # not found: the import fails at once, with the backend's own message


def enforces(name: str) -> bool:
    """Whether `--backend name` restricts tokens (so a constraint is required); `auto` always does."""
    return name == "auto" or get_backend(name).capabilities.enforces


def unsupported_reason(backend: Backend, spec: ConstraintSpec) -> str | None:
    """What `backend` lacks to run `spec`, or None when it can."""
    caps = backend.capabilities
    if spec.kind not in caps.kinds:
        return spec.kind.label
    if spec.kind is Kind.JSON_SCHEMA:
        for option in requested_json_options(spec):
            if option not in caps.json_options:
                return f"the JSON option {_OPTION_FLAGS[option]}"
    return None


def skip_reason(backend: Backend, spec: ConstraintSpec) -> str | None:
    """Why `backend` cannot run `spec` on this machine (a feature it lacks, or not installed), or None."""
    lacking = unsupported_reason(backend, spec)
    if lacking is not None:
        return f"{backend.name} does not support {lacking}"
    missing = backend.unavailable_reason()
    return f"{backend.name} is not usable: {missing}" if missing else None


def check_something_runs(pairs: list[tuple[str, ConstraintSpec]], what: str) -> None:
    """Exit 2, before anything slow loads, where no (backend, constraint) pair can run here: a report
    whose every row is skipped measured nothing, and exit 0 would pass it off as a result."""
    reasons = []
    for name, spec in pairs:
        reason = skip_reason(get_backend(name), spec)
        if reason is None:
            return
        reasons.append(reason)
    if not reasons:
        return
    able = [
        n
        for n in _ADAPTERS
        if get_backend(n).capabilities.enforces and any(skip_reason(get_backend(n), s) is None for _, s in pairs)
    ]
    raise UserError(
        f"nothing to {what}: " + "; ".join(dict.fromkeys(reasons)),
        hint=f"backends that can: {', '.join(able)} (choose with --backend)"
        if able
        else "drop the option no backend supports here; `sgcli backends` lists what each supports",
    )


_OPTION_FLAGS = {
    "compact": "--json-whitespace compact",
    "whitespace_pattern": "--whitespace-pattern",
    "indent": "--indent",
    "max_whitespace": "--max-whitespace",
    "strict_properties": "--strict-properties",
}


def requested_json_options(spec: ConstraintSpec) -> list[str]:
    o = spec.json_options
    wanted = []
    if o.whitespace == "compact":
        wanted.append("compact")
    if o.whitespace_pattern is not None:
        wanted.append("whitespace_pattern")
    if o.indent is not None:
        wanted.append("indent")
    if o.max_whitespace is not None:
        wanted.append("max_whitespace")
    if o.strict_properties:
        wanted.append("strict_properties")
    return wanted


def compile_for(name: str, spec: ConstraintSpec, vocab, compile_one=None) -> tuple[Compiled, list[dict]]:
    """Compile with the named backend for generating; returns (compiled, fallbacks) where fallbacks is
    [{backend, reason}] for every backend `auto` tried and skipped (empty otherwise).
    `compile_one(backend)`, when given, compiles instead of the default: through the grammar cache,
    bounded by the compile limits (`sgcli.backends.bounded`). Where the backend's grammar leaves JSON
    Schema keywords unenforced, the result's matchers carry sgcli's schema checker (`schema_checker`)."""
    compile_one = compile_one or (lambda backend: compile_cached(backend, spec, vocab).compiled)
    if name == "auto":
        from sgcli.backends.auto import compile_auto

        compiled, fallbacks = compile_auto(spec, vocab, compile_one)
        return with_checker(compiled), fallbacks
    compiled = compile_one(check_supports(name, spec))
    return with_checker(compiled), []


def check_supports(name: str, spec: ConstraintSpec) -> Backend:
    """The backend, or an exit-2 error naming what it lacks and which backends have it."""
    backend = get_backend(name)
    reason = unsupported_reason(backend, spec)
    if reason is not None:
        others = [
            n
            for n in _ADAPTERS
            if n != name and get_backend(n).capabilities.enforces and unsupported_reason(get_backend(n), spec) is None
        ]
        raise UnsupportedError(name, reason, others)
    missing = backend.unavailable_reason()
    if missing:
        raise UserError(f"backend '{name}' is not usable: {missing}")
    return backend
