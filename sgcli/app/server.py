"""A serving engine (`--engine vllm|sglang|openai`) as the runner of a generate request.

Only where the tokens come from changes: records, validation and exit codes are those of a
local run. A single prompt streams; a batch runs `--concurrency` requests at a time, and
`sgcli.app.generate` writes its records in input order as they complete.
"""

from __future__ import annotations

from collections.abc import Callable

from sgcli.app.request import GenerateRequest
from sgcli.batch.requests import BadLine, Request
from sgcli.errors import plural
from sgcli.serving import runner
from sgcli.serving.base import Dialect


class ServerRunner:
    """Every request of one generate request, sent to one server."""

    open_at_start = False  # the output opens with the first record, which comes only once the server answered

    def __init__(self, request: GenerateRequest, dialect: Dialect, unenforced: list[dict] | None = None):
        server, prompting = request.server, request.prompt_options
        self.title = f"generating on {server.engine}"
        self.concurrency = server.client.concurrency
        self.job = runner.EngineJob(
            server.engine,
            dialect,
            request.spec,
            request.sampling,
            server.client,
            server.served_model,
            prompting.system,
            prompting.raw,
            list(unenforced or []),
        )

    def run_single(self, req: Request, show: Callable[[str], None] | None) -> dict:
        return runner.run_single(self.job, req, show)

    def run_batch(self, items: list[Request | BadLine], put: Callable[[int, dict], None]) -> None:
        runner.run_batch(self.job, items, put)

    def how(self) -> str:
        return plural(self.concurrency, "concurrent request")
