"""vLLM's dialect (checked against vLLM 0.32's source): `structured_outputs` on both OpenAI routes.

`structured_outputs` holds exactly one of json (a schema object), regex, choice (a list),
grammar (xgrammar EBNF, or Lark, which vLLM converts or hands to llguidance) or
structural_tag (a JSON string, either SGLang shape). vLLM 0.32 reads the grammar backend
and the JSON layout options (`disable_any_whitespace`, `disable_additional_properties`)
from the server's start-up config only: the per-request fields of the same names are
accepted and ignored, so sgcli never sends them and treats those options as unsupported.
"""

from __future__ import annotations

from sgcli.constraints.spec import Kind
from sgcli.serving.base import EngineCapabilities, OpenAICompatible, structural_tag_object

VLLM_SERVER_BACKENDS = ("auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer")


class VLLMDialect(OpenAICompatible):
    name = "vllm"
    takes_top_k = True
    description = "vLLM's OpenAI server: structured_outputs on /v1/chat/completions and /v1/completions"
    capabilities = EngineCapabilities(
        kinds=frozenset(
            {Kind.JSON_SCHEMA, Kind.REGEX, Kind.CHOICE, Kind.EBNF, Kind.LARK, Kind.STRUCTURAL_TAG, Kind.NONE}
        ),
        json_options=frozenset(),
        routes=("chat", "completions"),
        raw_route="completions",
        server_backends=(),
        notes="grammar backend and JSON layout are server start options "
        "(--structured-outputs-config.backend: " + ", ".join(VLLM_SERVER_BACKENDS) + "); a request cannot choose them",
    )

    def constraint_fields(self, spec, route, server_backend) -> dict:
        kind = spec.kind
        if kind is Kind.JSON_SCHEMA:
            so = {"json": spec.schema()}
        elif kind is Kind.REGEX:
            so = {"regex": spec.text}
        elif kind is Kind.CHOICE:
            so = {"choice": list(spec.choices)}
        elif kind in (Kind.EBNF, Kind.LARK):
            so = {"grammar": spec.text}
        elif kind is Kind.STRUCTURAL_TAG:
            import json

            so = {"structural_tag": json.dumps(structural_tag_object(spec))}
        else:
            raise AssertionError(f"vllm asked for {kind}")  # capabilities keep other kinds out
        return {"structured_outputs": so}
