"""The typed requests the application layer runs: what to generate, from what, to where, on what.

cli/ builds them from flags (every flag already checked); nothing here reads a flag or a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sgcli.app.model import ModelOptions
from sgcli.backends import DEFAULT_BACKEND
from sgcli.batch.requests import PromptOptions
from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec

if TYPE_CHECKING:
    from sgcli.serving.client import ClientOptions


@dataclass(frozen=True)
class LocalOptions:
    """The in-process model and how it decodes."""

    model: ModelOptions = field(default_factory=ModelOptions)
    backend: str = DEFAULT_BACKEND
    think_end: str | None = None  # --reasoning: think freely, constrain only after this marker
    think_budget: int | None = None  # force the marker after this many thinking tokens
    jump_forward: bool = True  # append grammar-forced text in one forward pass (same outputs, fewer passes)
    allow_unenforced: bool = False  # --allow-unenforced: run even where nothing enforces a schema keyword


@dataclass(frozen=True)
class ServerOptions:
    """A serving engine (`--engine`): its dialect's name and how the client reaches it."""

    engine: str
    client: ClientOptions
    served_model: str | None = None  # None: the server's first in /v1/models
    allow_unenforced: bool = False  # --allow-unenforced: send a schema keyword sgcli cannot check in the answer


@dataclass(frozen=True)
class GenerateRequest:
    """One `sgcli generate`: what to generate, from what, to where, and what generates it
    (exactly one of `local` and `server`)."""

    spec: ConstraintSpec
    prompt: str | None = None  # a single prompt, or
    batch: tuple[list[bytes], str] | None = None  # --input's lines and name: one request per JSONL line
    output: Path | None = None  # None: stdout
    resume: bool = False  # skip the ids `output` already answers, append the rest
    force: bool = False  # replace a non-empty `output`
    json_out: bool = False  # a single prompt's record instead of its text
    batch_size: int = 1  # local batches: rows decoded together
    sampling: SamplingParams = SamplingParams()
    prompt_options: PromptOptions = field(default_factory=PromptOptions)
    local: LocalOptions | None = None
    server: ServerOptions | None = None

    def __post_init__(self) -> None:
        if (self.local is None) == (self.server is None):
            raise ValueError("a GenerateRequest runs on the local model or on a server: give exactly one")
        if (self.prompt is None) == (self.batch is None):
            raise ValueError("a GenerateRequest has a prompt or a batch: give exactly one")
