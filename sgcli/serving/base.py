"""The one protocol every serving-engine dialect implements, and what an engine accepts as data.

A `Dialect` turns (constraint, prompt, sampling) into one HTTP call in its server's terms and
reads the reply back into a `Reply`. It never sends anything itself: `sgcli.serving.client`
does the HTTP, `sgcli.serving.runner` turns replies into the same records a local run writes.
Most engines speak the OpenAI shapes, so `OpenAICompatible` holds that plumbing and each
dialect only says where the constraint goes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import ClassVar

from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import SgcliError, UserError
from sgcli.lone_surrogates import lone_surrogate

ROUTES = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",  # SGLang's native route
}


class BadReply(SgcliError):
    """The server answered with a success status but not with what its API promises (not JSON,
    another content type, a JSON shape without the fields a reply has): nothing usable came back."""


def reply_object(value, what: str = "the reply") -> dict:
    """`value` as a JSON object, or BadReply naming what it was; a 2xx carrying an error says so."""
    if not isinstance(value, dict):
        raise BadReply(f"{what} is a JSON {_json_type(value)}, not an object")
    error = value.get("error")
    if error is not None and not value.get("choices") and "text" not in value:
        message = error.get("message", error) if isinstance(error, dict) else error
        raise BadReply(f"{what} carries an error instead of a completion: {str(message)[:300]}")
    return value


def reply_field(obj: dict, key: str, kind: type | tuple, where: str):
    """obj[key] where it is absent/null or of `kind`; anything else is a BadReply naming the field."""
    value = obj.get(key)
    if value is None:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise BadReply(f"`{where}{key}` in the reply is a JSON {_json_type(value)}, not {names}")
    at = lone_surrogate(value) if isinstance(value, str) else None
    if at is not None:
        raise BadReply(f"`{where}{key}` in the reply holds a lone surrogate ({value[at]!r}), which is not text")
    return value


def usage_counts(obj: dict, key: str, where: str) -> tuple[int | None, int | None, tuple[str, ...]]:
    """(prompt_tokens, completion_tokens, what was odd) of `obj[key]`: a count that is not a whole number
    of 0 or more (a string, NaN, -1) is left null and named, never a reason to drop the answer it came
    with (a server's `"prompt_tokens": "lots"` had thrown away a valid completion)."""
    usage = obj.get(key)
    if usage is None:
        return None, None, ()
    if not isinstance(usage, dict):
        return None, None, (f"`{where}{key}` is a JSON {_json_type(usage)}, not an object",)
    counts, odd = [], []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        fine = value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
        counts.append(value if fine else None)
        if not fine:
            infinite = isinstance(value, float) and not math.isfinite(value)
            shown = "NaN or an infinity, which JSON has no number for" if infinite else f"{value!r}"
            odd.append(f"`{where}{key}.{name}` is {shown}, not a count")
    return counts[0], counts[1], tuple(odd)


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


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
    ignored_choices: tuple[int, ...] = ()  # indexes of choices sgcli did not ask for (`asked_choice`)
    odd_usage: tuple[str, ...] = ()  # usage fields that held no count, left null (`usage_counts`)
    refusal: str | None = None  # OpenAI's `message.refusal`: the model declined, in its words


@dataclass
class Delta:
    """One streamed chunk: new text, and the finish reason / usage when the server sends them."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cumulative: bool = False  # `text` is the whole output so far, not just the new part
    ignored_choices: tuple[int, ...] = ()
    odd_usage: tuple[str, ...] = ()


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


def asked_choice(choices: list, what: str) -> tuple[dict | None, tuple[int, ...]]:
    """The choice sgcli asked for, index 0 (it asks for one, n=1; a choice without `index` counts by its
    place), and the indexes of the others, which are not its answer: a server that sent a second choice
    had it concatenated into the output (`garbage{"country": ...}`)."""
    chosen, others = None, []
    for place, choice in enumerate(choices):
        choice = reply_object(choice, f"`choices[{place}]`{what}")
        index = reply_field(choice, "index", int, f"choices[{place}].")
        index = place if index is None else index
        if index == 0 and chosen is None:
            chosen = choice
        else:
            others.append(index)
    return chosen, tuple(others)


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
        body = reply_object(body)
        choices = reply_field(body, "choices", list, "")
        if not choices:
            raise BadReply("the reply has no `choices`: no completion came back")
        choice, ignored = asked_choice(choices, "")
        if choice is None:
            raise BadReply(f"the reply has no choice with index 0, the one sgcli asked for (only {list(ignored)})")
        refusal = None
        if call.route == "chat":
            message = reply_field(choice, "message", dict, "choices[0].") or {}
            text = reply_field(message, "content", str, "choices[0].message.") or ""
            refusal = reply_field(message, "refusal", str, "choices[0].message.")
        else:
            text = reply_field(choice, "text", str, "choices[0].") or ""
        prompt_tokens, completion_tokens, odd = usage_counts(body, "usage", "")
        return Reply(
            text,
            reply_field(choice, "finish_reason", str, "choices[0].") or "unknown",
            prompt_tokens,
            completion_tokens,
            ignored_choices=ignored,
            odd_usage=odd,
            refusal=refusal,
        )

    def delta(self, call: Call, chunk: dict) -> Delta:
        chunk = reply_object(chunk, "a stream event")
        prompt_tokens, completion_tokens, odd = usage_counts(chunk, "usage", "")
        choices = reply_field(chunk, "choices", list, "") or []
        text, finish = "", None
        c, ignored = asked_choice(choices, " of a stream event")
        if c is not None:
            if call.route == "chat":
                text = reply_field(
                    reply_field(c, "delta", dict, "choices[0].") or {}, "content", str, "choices[0].delta."
                )
            else:
                text = reply_field(c, "text", str, "choices[0].")
            finish = reply_field(c, "finish_reason", str, "choices[0].")
        return Delta(text or "", finish, prompt_tokens, completion_tokens, ignored_choices=ignored, odd_usage=odd)
