"""Reasoning mode, composite Lark + JSON Schema grammars, and min-token holding, on the random model."""

from __future__ import annotations

import json
import re

from sgcli.backends import get_backend
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.engine.decode import Finished, decode
from sgcli.engine.sampling import SamplingParams

ANSWER = json.dumps(
    {
        "type": "object",
        "properties": {"answer": {"enum": ["Yes", "No"]}},
        "required": ["answer"],
        "additionalProperties": False,
    }
)
TOP = 'start: "Reasoning: " /[a-z ,.]{1,40}/ "\\nJSON: " @myobj\n'


def _finish(lm, tokenizer, spec, **kw) -> Finished:
    compiled = get_backend("xgrammar").compile(spec, tokenizer.vocab.padded(lm.logits_width))
    ids = tokenizer.encode("Q:")
    events = list(decode(lm, ids, compiled, params=SamplingParams(temperature=1.0, seed=kw.pop("seed", 0)), **kw))
    return events[-1]


def test_composite_lark_with_json_subgrammar(tiny_lm, smol_tokenizer):
    sub = ConstraintSpec(Kind.JSON_SCHEMA, ANSWER, "answer.json", json_options=JsonOptions(whitespace="compact"))
    spec = ConstraintSpec(Kind.LARK, TOP, "top.lark", subgrammars=(("myobj", sub),))
    for seed in range(6):
        f = _finish(tiny_lm, smol_tokenizer, spec, seed=seed, max_tokens=120)
        assert f.finish_reason == "stop", f
        m = re.fullmatch(r"Reasoning: [a-z ,.]{1,40}\nJSON: (.*)", f.output, flags=re.S)
        assert m, f.output
        assert json.loads(m.group(1)) in ({"answer": "Yes"}, {"answer": "No"})


def test_reasoning_is_free_and_the_answer_is_constrained(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "(yes|no)", "--regex")
    outcomes = []
    for seed in range(8):
        # a one-character marker so the random model reaches it: every token containing "e" ends the thinking
        f = _finish(tiny_lm, smol_tokenizer, spec, seed=seed, max_tokens=80, think_end="e")
        outcomes.append(f)
        if f.finish_reason == "stop" and f.error is None:
            assert f.output in ("yes", "no")
            assert "e" not in f.reasoning.split("e", 1)[0]
    assert any(f.error is None and f.output in ("yes", "no") for f in outcomes)
    # the free phase is really free: some reasoning text is not a sentence of the answer grammar
    assert any(f.reasoning and not re.fullmatch("(yes|no)", f.reasoning) for f in outcomes)


def test_min_tokens_holds_back_stop_tokens(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.NONE, "", None)
    compiled = get_backend("none").compile(spec, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    events = list(
        decode(tiny_lm, [1, 2, 3], compiled, params=SamplingParams(temperature=0), max_tokens=17, min_tokens=17)
    )
    f = events[-1]
    assert f.completion_tokens == 17 and not set(f.token_ids) & set(smol_tokenizer.vocab.stop_ids)


def test_a_prompt_that_already_closed_thinking_is_constrained_from_the_first_token(tiny_lm, smol_tokenizer):
    """Qwen3's template with enable_thinking=false ends the prompt `<think>\\n\\n</think>\\n\\n`: the whole
    output had been taken for reasoning, never constrained (valid: false, empty output)."""
    from sgcli.engine.batching import decode_batch

    spec = ConstraintSpec(Kind.REGEX, "(yes|no)", "--regex")
    compiled = get_backend("xgrammar").compile(spec, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    closed = smol_tokenizer.encode("Q:<think>\n\n</think>\n\n")
    params = SamplingParams(temperature=1.0, seed=3)
    single = list(decode(tiny_lm, closed, compiled, params=params, max_tokens=20, think_end="</think>"))[-1]
    [(_, batched)] = list(
        decode_batch(tiny_lm, [closed], compiled, params=params, max_tokens=20, batch_size=2, think_end="</think>")
    )
    for f in (single, batched):
        assert f.prompt_ended_thinking and f.reasoning == "" and f.output in ("yes", "no"), f
    still_open = list(
        decode(tiny_lm, smol_tokenizer.encode("Q:<think>"), compiled, params=params, max_tokens=5, think_end="</think>")
    )[-1]
    assert not still_open.prompt_ended_thinking and still_open.reasoning


def test_ids_past_the_tokenizer_are_never_sampled_where_nothing_constrains(smol_tokenizer):
    """A model with more logit rows than its tokenizer has ids (Qwen pads its head), the padding rows'
    logits the largest: the none backend, and a grammar's free thinking phase, alone and batched, write
    only the tokenizer's ids, where they once wrote padding ids (tokens counted, no text, no warning)."""
    import torch
    from helpers import random_llama

    from sgcli.engine.batching import decode_batch

    size = len(smol_tokenizer.vocab)
    lm = random_llama(size + 64, "padded-head")
    with torch.no_grad():
        lm.runtime.module.lm_head.weight[size:] *= 100
    ids = smol_tokenizer.encode("Q:")
    params = SamplingParams(temperature=1.0, seed=0)
    cases = [("none", ConstraintSpec(Kind.NONE, "", None), None)]
    cases.append(("xgrammar", ConstraintSpec(Kind.REGEX, "(yes|no)", "--regex"), "</think>"))
    for backend, spec, think_end in cases:
        compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab.padded(lm.logits_width))
        single = list(decode(lm, ids, compiled, params=params, max_tokens=8, think_end=think_end))[-1]
        [(_, batched)] = list(
            decode_batch(lm, [ids], compiled, params=params, max_tokens=8, batch_size=2, think_end=think_end)
        )
        for f in (single, batched):
            assert len(f.token_ids) == 8 and max(f.token_ids) < size, (backend, f.token_ids)
            assert f.output or f.reasoning
