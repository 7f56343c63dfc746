"""The flags that send a command to a serving engine instead of the in-process model."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from sgcli.errors import UserError

_PANEL = "Engine"

EngineOpt = Annotated[
    str,
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


def client_options(
    engine: str,
    base_url: str | None,
    api_key_env: str | None,
    concurrency: int,
    retries: int,
    request_timeout: float,
):
    """Check the engine flags (before anything slow) and return the client's options."""
    from sgcli.extras import require
    from sgcli.serving import get_dialect

    get_dialect(engine)  # unknown name -> exit 2 naming the engines
    require("serve", f"--engine {engine}")
    from sgcli.serving.client import ClientOptions

    if not base_url:
        raise UserError(f"--engine {engine} needs --base-url", hint="e.g. --base-url http://127.0.0.1:8000")
    if not base_url.startswith(("http://", "https://")):
        raise UserError(f"--base-url must start with http:// or https://, got {base_url!r}")
    if concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    if retries < 0:
        raise UserError("--retries must be 0 or more")
    if request_timeout <= 0:
        raise UserError("--request-timeout must be more than 0 seconds")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise UserError(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
    return ClientOptions(base_url, api_key, concurrency, retries, request_timeout)
