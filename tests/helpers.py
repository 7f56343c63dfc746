"""Test helpers shared across modules."""

from __future__ import annotations


def generate_with(
    lm, tokenizer, spec, backend=None, *, seed=0, max_tokens=200, temperature=1.0, prompt="Answer:", stop=()
):
    """Run one constrained generation on `lm` and return the record dict."""
    from sgcli.backends import DEFAULT_BACKEND, compile_for
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    vocab = tokenizer.vocab.padded(lm.logits_width)
    compiled, _ = compile_for(backend or DEFAULT_BACKEND, spec, vocab)
    session = Session(
        lm,
        tokenizer,
        compiled,
        SamplingParams(temperature=temperature, seed=seed),
        max_tokens,
        tuple(stop),
        PromptOptions(raw=True),
    )
    events = list(session.stream(Request(seed, prompt)))
    return events[-1].record
