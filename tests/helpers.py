"""Test helpers shared across modules."""

from __future__ import annotations

_compiled: dict = {}  # (backend, spec, vocab id) -> Compiled: compiled once per test run, as a batch does


def generate_with(
    lm, tokenizer, spec, backend=None, *, seed=0, max_tokens=200, temperature=1.0, prompt="Answer:", stop=()
):
    """Run one constrained generation on `lm` and return the record dict."""
    from sgcli.backends import DEFAULT_BACKEND, compile_for
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    vocab = tokenizer.vocab.padded(lm.logits_width)
    key = (backend or DEFAULT_BACKEND, spec, id(vocab))
    if key not in _compiled:
        _compiled[key] = (compile_for(key[0], spec, vocab)[0], vocab)  # the vocab is kept so its id stays its own
    compiled = _compiled[key][0]
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
