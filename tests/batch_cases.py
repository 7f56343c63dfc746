"""Shared cases of the batching tests (test_batching, test_batch_steps): a schema, prompts, and a
session on a model, whose batched records are compared with the single-stream loop's."""

from __future__ import annotations

import json

from sgcli.backends import backend_names, check_supports
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.engine.sampling import SamplingParams
from sgcli.engine.session import PromptOptions, Request, Session

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "n": {"type": "integer", "minimum": 0, "maximum": 9999},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
    },
    "required": ["name", "n", "tags"],
    "additionalProperties": False,
}
SYSTEM = "You are a careful assistant that answers with one JSON object and nothing else, ever."
PROMPTS = [
    "Capital of France?",
    "Name a colour.",
    "Describe a cat in detail, please, with tags",
    "x",
    "Tell me about the number seven and why it matters.",
    "Largest planet?",
    "Hi",
    "Write a JSON object about a dog named Rex who is four.",
    "One more question about the sea.",
    "Last one.",
]


def json_spec(compact: bool = True) -> ConstraintSpec:
    options = JsonOptions(whitespace="compact") if compact else JsonOptions(max_whitespace=2)
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SCHEMA), "test", json_options=options)


def session_for(lm, tokenizer, spec, backend="xgrammar", *, max_tokens=60, stop=(), temperature=0.0, system=SYSTEM):
    vocab = tokenizer.vocab.padded(lm.logits_width)
    compiled = check_supports(backend, spec).compile(spec, vocab)
    params = SamplingParams(temperature=temperature, seed=7)
    # Batched rows decode every token, so the records to match are the plain loop's (jump-forward off).
    options = PromptOptions(system=system)
    return Session(lm, tokenizer, compiled, params, max_tokens, tuple(stop), options, jump_forward=False)


def sequential(session, requests) -> list[dict]:
    return [list(session.stream(r))[-1].record for r in requests]


def comparable(record: dict) -> dict:
    """A record without its timings (the only fields allowed to differ between the two paths)."""
    return {k: v for k, v in record.items() if k != "timings"}


def make_requests(prompts=PROMPTS) -> list[Request]:
    return [Request(f"r{i}", p) for i, p in enumerate(prompts)]


def json_backends() -> list[str]:
    spec = json_spec()
    names = []
    for name in backend_names():
        try:
            check_supports(name, spec)
        except Exception:  # a backend that cannot take this spec is not under test here
            continue
        names.append(name)
    return names


def default_model_session(smol_tokenizer) -> Session:
    """The default model in float32 on a capital-city schema (compact), jump-forward off."""
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    lm = load_model(resolve_model(None), device="cpu", dtype="float32", threads=1)
    capital = {
        "type": "object",
        "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
        "required": ["country", "capital"],
    }
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(capital), "test", json_options=JsonOptions(whitespace="compact"))
    return session_for(lm, smol_tokenizer, spec, max_tokens=40)
