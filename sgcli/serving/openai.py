"""Any OpenAI-compatible server: JSON Schema through `response_format`, chat route only.

OpenAI's structured outputs take the schema as an object under
`response_format: {type: "json_schema", json_schema: {name, schema, strict}}`; there is no
regex, grammar or choice, no top_k, and `response_format` exists on chat completions only.
"""

from __future__ import annotations

from sgcli.constraints.spec import Kind
from sgcli.serving.base import EngineCapabilities, OpenAICompatible, json_schema_format


class OpenAIDialect(OpenAICompatible):
    name = "openai"
    description = "any OpenAI-compatible server: response_format json_schema on /v1/chat/completions"
    capabilities = EngineCapabilities(
        kinds=frozenset({Kind.JSON_SCHEMA, Kind.NONE}),
        routes=("chat",),
        raw_route=None,
        notes="strict mode is always requested (the server may demand additionalProperties: false); "
        "whitespace is the server's choice",
    )

    def constraint_fields(self, spec, route, server_backend) -> dict:
        return {"response_format": json_schema_format(spec, strict=True)}
