"""Serving engines: the same constraints sent to a server (vLLM, SGLang, any OpenAI-compatible one).

Engines are peers like the grammar backends: each dialect declares what it accepts as
`EngineCapabilities`, and asking one for what it lacks is an exit-2 error naming the
engines and local backends that can. Nothing here imports a grammar library or torch.
"""

from __future__ import annotations

import importlib

from sgcli.backends import _OPTION_FLAGS, requested_json_options
from sgcli.backends.matching import backends_for
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.serving.base import Dialect

LOCAL = "local"
_DIALECTS = {
    "vllm": "sgcli.serving.vllm:VLLMDialect",
    "sglang": "sgcli.serving.sglang:SGLangDialect",
    "openai": "sgcli.serving.openai:OpenAIDialect",
}
_instances: dict[str, Dialect] = {}


def engine_names() -> list[str]:
    return list(_DIALECTS)


def get_dialect(name: str) -> Dialect:
    if name not in _DIALECTS:
        raise UserError(f"unknown engine '{name}'", hint="choose one of: " + ", ".join([LOCAL, *_DIALECTS]))
    if name not in _instances:
        module, cls = _DIALECTS[name].split(":")
        _instances[name] = getattr(importlib.import_module(module), cls)()
    return _instances[name]


def unsupported_reason(dialect: Dialect, spec: ConstraintSpec, *, raw: bool = False) -> str | None:
    """What `dialect` lacks to send `spec`, or None when it can."""
    caps = dialect.capabilities
    if spec.kind not in caps.kinds:
        return spec.kind.label
    if spec.subgrammars and not caps.subgrammars:
        return "Lark grammars with @name sub-grammars"
    for option in requested_json_options(spec) if spec.kind is Kind.JSON_SCHEMA else []:
        if option not in caps.json_options:
            return f"the JSON option {_OPTION_FLAGS[option]} per request"
    if raw and caps.raw_route is None:
        return "--raw (a prompt without the chat template)"
    return None


def check_engine_supports(name: str, spec: ConstraintSpec, *, raw: bool = False) -> Dialect:
    """The dialect, or an exit-2 error naming what it lacks, the engines that have it and the
    local backends that do."""
    dialect = get_dialect(name)
    reason = unsupported_reason(dialect, spec, raw=raw)
    if reason is None:
        return dialect
    engines = [n for n in _DIALECTS if n != name and unsupported_reason(get_dialect(n), spec, raw=raw) is None]
    local = backends_for(spec)
    who = []
    if engines:
        who.append("engines: " + ", ".join(engines))
    if local:
        who.append("local backends (--engine local): " + ", ".join(local))
    raise UserError(
        f"engine '{name}' does not support {reason}",
        hint=("; ".join(who) + " can") if who else "no engine or local backend can",
    )


def refuse_backend_choice(name: str, backend: str | None, *, why: str, hint: str) -> None:
    """A request to engine `name` that needs a grammar backend of its own choosing (`backend`, or one
    per row where None) is exit 2 where the engine picks its backend when the server starts: the name
    would be sent nowhere (generate once ran on, recording backend "server")."""
    caps = get_dialect(name).capabilities
    if caps.server_backends and (backend is None or backend in caps.server_backends):
        return
    if caps.server_backends:
        why = f"its requests choose only {', '.join(caps.server_backends)}"
    raise UserError(
        f"engine '{name}' picks its grammar backend when the server starts; a request cannot choose one, {why}",
        hint=f"{hint} ({caps.notes})" if caps.notes else hint,
    )
