"""The one protocol every serving-engine dialect implements, and what an engine accepts as data.

A `Dialect` turns (constraint, prompt, sampling) into one HTTP call in its server's terms and
reads the reply back into a `Reply`. It never sends anything itself: `sgcli.serving.client`
does the HTTP, `sgcli.serving.runner` turns replies into the same records a local run writes.
Most engines speak the OpenAI shapes, so `OpenAICompatible` holds that plumbing and each
dialect only says where the constraint goes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

ROUTES = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",  # SGLang's native route
}


@dataclass(frozen=True)
class EngineCapabilities:
    """What a server accepts in a request: constraint kinds, JSON layout options, routes."""

    kinds: frozenset[Kind]
    json_options: frozenset[str] = frozenset()  # same names as the backends' (see sgcli.backends._OPTION_FLAGS)
    routes: tuple[str, ...] = ("chat",)  # chat: messages, server's template; raw: the prompt as is
    raw_route: str | None = None  # the route `--raw` uses (None: this engine has none)
    server_backends: tuple[str, ...] = ()  # grammar backends a request may choose; () = fixed at server start
    subgrammars: bool = False  # Lark `@name` sub-grammars (llguidance-backed servers only)
    notes: str = ""


@dataclass(frozen=True)
class Call:
    """One HTTP request, before it is sent."""

    route: str  # a key of ROUTES
    body: dict

    @property
    def path(self) -> str:
        return ROUTES[self.route]


@dataclass
class Reply:
    """What the server said, in sgcli's terms."""

    output: str
    finish_reason: str  # "stop" | "length" | whatever else the server said
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    server_timings: dict = field(default_factory=dict)


@dataclass
class Delta:
    """One streamed chunk: new text, and the finish reason / usage when the server sends them."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cumulative: bool = False  # `text` is the whole output so far, not just the new part


class Dialect:
    """Base of every dialect: capability checks shared by all; the request/reply shapes are theirs."""

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[EngineCapabilities]

    def request(
        self,
        spec: ConstraintSpec,
        messages: list[dict] | None,
        prompt: str | None,
        sampling: SamplingParams,
        *,
        model: str,
        stream: bool = False,
        server_backend: str | None = None,
    ) -> Call:
        raise NotImplementedError

    def reply(self, call: Call, body: dict) -> Reply:
        raise NotImplementedError

    def delta(self, call: Call, chunk: dict) -> Delta:
        raise NotImplementedError


def json_schema_format(spec: ConstraintSpec, *, strict: bool | None = None) -> dict:
    """OpenAI's `response_format` for a JSON Schema: the schema as an object, named after its file."""
    name = (spec.origin or "schema").rsplit("/", 1)[-1].split(".")[0]
    safe = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64] or "schema"
    inner = {"name": safe, "schema": spec.schema()}
    if strict is not None:
        inner["strict"] = strict
    return {"type": "json_schema", "json_schema": inner}


def structural_tag_object(spec: ConstraintSpec) -> dict:
    """The user's structural tag in either SGLang shape, as a JSON object with `type` set."""
    tag = json.loads(spec.text)
    if not isinstance(tag, dict):
        raise UserError("a structural tag must be a JSON object", hint="see sgcli/constraints/structural_tag.py")
    return tag if "type" in tag else {"type": "structural_tag", **tag}


class OpenAICompatible(Dialect):
    """Chat and completions bodies, replies and stream chunks in the OpenAI shapes."""

    takes_top_k: ClassVar[bool] = False  # OpenAI's API has no top_k; vLLM and SGLang add it

    def constraint_fields(self, spec: ConstraintSpec, route: str, server_backend: str | None) -> dict:
        """The body fields that carry the constraint (the one thing dialects differ in)."""
        raise NotImplementedError

    def request(self, spec, messages, prompt, sampling, *, model, stream=False, server_backend=None) -> Call:
        route = "chat" if messages is not None else self.capabilities.raw_route
        body: dict = {"model": model}
        if route == "chat":
            body["messages"] = messages
        else:
            body["prompt"] = prompt
        body.update(self.sampling_fields(sampling))
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if spec.kind is not Kind.NONE:
            body.update(self.constraint_fields(spec, route, server_backend))
        return Call(route, body)

    def sampling_fields(self, s: SamplingParams) -> dict:
        fields = {"max_tokens": s.max_tokens, "temperature": s.temperature, "top_p": s.top_p, "seed": s.seed}
        if self.takes_top_k and s.top_k > 0:
            fields["top_k"] = s.top_k
        if s.stop:
            fields["stop"] = list(s.stop)
        return fields

    def reply(self, call: Call, body: dict) -> Reply:
        choice = (body.get("choices") or [{}])[0]
        if call.route == "chat":
            text = (choice.get("message") or {}).get("content") or ""
        else:
            text = choice.get("text") or ""
        usage = body.get("usage") or {}
        return Reply(
            text, choice.get("finish_reason") or "unknown", usage.get("prompt_tokens"), usage.get("completion_tokens")
        )

    def delta(self, call: Call, chunk: dict) -> Delta:
        usage = chunk.get("usage") or {}
        choices = chunk.get("choices") or []
        text, finish = "", None
        if choices:
            c = choices[0]
            text = ((c.get("delta") or {}).get("content") if call.route == "chat" else c.get("text")) or ""
            finish = c.get("finish_reason")
        return Delta(text, finish, usage.get("prompt_tokens"), usage.get("completion_tokens"))
