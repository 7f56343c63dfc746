"""SGLang's dialect: OpenAI routes with `regex` / `ebnf` / `response_format`, and native `/generate`.

On the OpenAI routes a JSON Schema goes in `response_format` (type json_schema, schema as an
object), a regex in `regex`, a GBNF grammar in `ebnf`, and a structural tag in
`response_format` with type structural_tag, in either of SGLang's shapes. The native
`/generate` route (used for `--raw`) takes the same constraints inside `sampling_params`,
where the schema and the structural tag are JSON *strings*. A choice is sent as the
equivalent regex. SGLang's grammar backend (xgrammar, outlines, llguidance) is a server
start option (`--grammar-backend`).
"""

from __future__ import annotations

import json

from sgcli.constraints.spec import Kind
from sgcli.serving.base import (
    Call,
    Delta,
    EngineCapabilities,
    OpenAICompatible,
    Reply,
    json_schema_format,
    reply_field,
    reply_object,
    structural_tag_object,
)


class SGLangDialect(OpenAICompatible):
    name = "sglang"
    takes_top_k = True
    description = "SGLang: regex/ebnf/response_format on the OpenAI routes, sampling_params on /generate"
    capabilities = EngineCapabilities(
        kinds=frozenset({Kind.JSON_SCHEMA, Kind.REGEX, Kind.CHOICE, Kind.EBNF, Kind.STRUCTURAL_TAG, Kind.NONE}),
        json_options=frozenset(),
        routes=("chat", "completions", "generate"),
        raw_route="generate",
        server_backends=(),
        notes="grammar backend is a server start option (--grammar-backend xgrammar|outlines|llguidance); "
        "choice is sent as a regex; JSON whitespace is server-wide (--constrained-json-whitespace-pattern)",
    )

    def request(self, spec, messages, prompt, sampling, *, model, stream=False, server_backend=None) -> Call:
        if messages is not None:
            return super().request(
                spec, messages, prompt, sampling, model=model, stream=stream, server_backend=server_backend
            )
        params = {
            "max_new_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "sampling_seed": sampling.seed,
        }
        if sampling.top_k > 0:
            params["top_k"] = sampling.top_k
        if sampling.stop:
            params["stop"] = list(sampling.stop)
        if spec.kind is not Kind.NONE:
            params.update(self._native_constraint(spec))
        body = {"text": prompt, "sampling_params": params}
        if stream:
            body["stream"] = True
        return Call("generate", body)

    def constraint_fields(self, spec, route, server_backend) -> dict:
        kind = spec.kind
        if kind is Kind.JSON_SCHEMA:
            return {"response_format": json_schema_format(spec)}
        if kind in (Kind.REGEX, Kind.CHOICE):
            return {"regex": spec.as_regex()}
        if kind is Kind.EBNF:
            return {"ebnf": spec.text}
        if kind is Kind.STRUCTURAL_TAG:
            return {"response_format": structural_tag_object(spec)}
        raise AssertionError(f"sglang asked for {kind}")

    def _native_constraint(self, spec) -> dict:
        kind = spec.kind
        if kind is Kind.JSON_SCHEMA:
            return {"json_schema": json.dumps(spec.schema())}
        if kind in (Kind.REGEX, Kind.CHOICE):
            return {"regex": spec.as_regex()}
        if kind is Kind.EBNF:
            return {"ebnf": spec.text}
        if kind is Kind.STRUCTURAL_TAG:
            return {"structural_tag": json.dumps(structural_tag_object(spec))}
        raise AssertionError(f"sglang asked for {kind}")

    def reply(self, call: Call, body: dict) -> Reply:
        if call.route != "generate":
            return super().reply(call, body)
        body = reply_object(body)
        meta = reply_field(body, "meta_info", dict, "") or {}
        latency = reply_field(meta, "e2e_latency", (int, float), "meta_info.")
        timings = {"server_ms": round(latency * 1000, 4)} if latency is not None else {}  # it says seconds
        return Reply(
            reply_field(body, "text", str, "") or "",
            _finish(meta.get("finish_reason")),
            reply_field(meta, "prompt_tokens", int, "meta_info."),
            reply_field(meta, "completion_tokens", int, "meta_info."),
            timings,
        )

    def delta(self, call: Call, chunk: dict) -> Delta:
        if call.route != "generate":
            return super().delta(call, chunk)
        # The native stream sends the whole text so far in each chunk; the runner keeps the last.
        chunk = reply_object(chunk, "a stream event")
        meta = reply_field(chunk, "meta_info", dict, "") or {}
        finish = meta.get("finish_reason")
        return Delta(
            reply_field(chunk, "text", str, "") or "",
            _finish(finish) if finish else None,
            reply_field(meta, "prompt_tokens", int, "meta_info."),
            reply_field(meta, "completion_tokens", int, "meta_info."),
            cumulative=True,
        )


def _finish(reason) -> str:
    """SGLang's native finish_reason is an object like {"type": "length", "length": 16}."""
    if isinstance(reason, dict):
        return str(reason.get("type") or "unknown")
    return str(reason) if reason else "unknown"
