"""The flags that send a command to a serving engine instead of the in-process model."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Optional

import typer

from sgcli.cli.flag_groups import takes
from sgcli.errors import UserError
from sgcli.extras import require
from sgcli.serving import get_dialect

_PANEL = "Engine"


class Engine(str, Enum):
    """Where tokens come from: the in-process model, or a server's dialect (sgcli.serving)."""

    local = "local"
    vllm = "vllm"
    sglang = "sglang"
    openai = "openai"


EngineOpt = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="local (in-process model), or a server: vllm, sglang, openai (see `sgcli backends --engines`).",
        rich_help_panel=_PANEL,
    ),
]
BaseUrlOpt = Annotated[
    Optional[str],
    typer.Option("--base-url", help="The server's address, e.g. http://127.0.0.1:8000.", rich_help_panel=_PANEL),
]
ApiKeyEnvOpt = Annotated[
    Optional[str],
    typer.Option("--api-key-env", help="Name of the environment variable holding the API key.", rich_help_panel=_PANEL),
]
ServedModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--served-model",
        help="The model name the server knows (default: its first in /v1/models).",
        rich_help_panel=_PANEL,
    ),
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", help="Requests in flight at once for --input batches.", rich_help_panel=_PANEL)
]
RetriesOpt = Annotated[
    int,
    typer.Option("--retries", help="Retries on 429, 5xx, connection resets and timeouts.", rich_help_panel=_PANEL),
]
RequestTimeoutOpt = Annotated[
    float, typer.Option("--request-timeout", help="Seconds to wait for one answer.", rich_help_panel=_PANEL)
]


@dataclass
class EngineFlags:
    """Which server answers (if any) and how the client talks to it."""

    engine: str = "local"
    base_url: str | None = None
    api_key_env: str | None = None
    served_model: str | None = None
    concurrency: int = 4
    retries: int = 3
    request_timeout: float = 120.0

    @property
    def local(self) -> bool:
        return self.engine == Engine.local.value

    def check(self) -> None:
        """A server's flags with the local engine would be ignored: the run would load the in-process
        model (tens of seconds) where the user meant a server. A value no engine takes is exit 2 with either."""
        if self.concurrency < 1:
            raise UserError("--concurrency must be at least 1")
        if not self.local:
            return
        for flag, value in (
            ("--base-url", self.base_url),
            ("--api-key-env", self.api_key_env),
            ("--served-model", self.served_model),
        ):
            if value:
                raise UserError(
                    f"{flag} is for a server, but --engine is local (the in-process model)",
                    hint="add --engine vllm, sglang or openai, or drop the flag",
                )

    def client(self):
        """Check the engine flags (before anything slow) and return the client's options."""

        get_dialect(self.engine)  # a name the Enum lists but no dialect has is a bug the tests catch
        require("serve", f"--engine {self.engine}")
        from sgcli.serving.client import ClientOptions

        if not self.base_url:
            raise UserError(f"--engine {self.engine} needs --base-url", hint="e.g. --base-url http://127.0.0.1:8000")
        if not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"--base-url must start with http:// or https://, got {self.base_url!r}")
        problem = _url_problem(self.base_url)
        if problem:
            raise UserError(f"--base-url {self.base_url!r} is not a URL: {problem}", hint="e.g. http://127.0.0.1:8000")
        if self.concurrency < 1:
            raise UserError("--concurrency must be at least 1")
        if self.served_model is not None and not self.served_model.isprintable():  # `m\r\nX-Evil: 1`
            raise UserError(
                f"--served-model {self.served_model!r} holds a control character, which no model id does",
                hint="give the id GET /v1/models lists",
            )
        if self.retries < 0:
            raise UserError("--retries must be 0 or more")
        if not self.request_timeout > 0:  # NaN too: httpx's deadline would fail on it mid-request
            raise UserError(f"--request-timeout must be more than 0 seconds, got {self.request_timeout}")
        api_key = None
        if self.api_key_env:
            api_key = os.environ.get(self.api_key_env)
            if not api_key:
                raise UserError(f"--api-key-env {self.api_key_env}: that environment variable is not set or empty")
            if not api_key.isprintable():  # a newline in it made httpx fail, which read as the server's fault
                raise UserError(
                    f"--api-key-env {self.api_key_env}: the key holds a control character (a newline?)",
                    hint="strip it: export the key without its line break",
                )
        return ClientOptions(self.base_url, api_key, self.concurrency, self.retries, self.request_timeout)


ENGINE_FLAGS = {
    "engine": (EngineOpt, Engine.local),
    "base_url": (BaseUrlOpt, None),
    "api_key_env": (ApiKeyEnvOpt, None),
    "served_model": (ServedModelOpt, None),
    "concurrency": (ConcurrencyOpt, 4),
    "retries": (RetriesOpt, 3),
    "request_timeout": (RequestTimeoutOpt, 120.0),
}


def takes_engine(**kw):
    """The command gets `engine_flags: EngineFlags`."""
    return takes("engine_flags", EngineFlags, ENGINE_FLAGS, **kw)


def _url_problem(url: str) -> str | None:
    """What makes `url` unusable as a server address (a port out of range, a broken IPv6 bracket, spaces),
    found before any request: the client raised them as errors no record could hold (exit 3)."""
    from urllib.parse import urlsplit

    if any(ch.isspace() for ch in url):
        return "it holds a space"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError past 65535 or not a number
    except ValueError as exc:
        return str(exc)
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 is no server's port"
    return None
