"""The per-token rules of one sequence (sgcli.engine.sequence), fed tokens directly, without a model.

The single-stream loop and batch rows both hold a SequenceState; these tests pin its rules:
stop strings cut the output and are never streamed, the token budget ends in "length", a
reasoning model's free phase ends at the marker (or where its budget forces it).
"""

from __future__ import annotations

import pytest

from sgcli.backends import get_backend
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.engine.sampling import SamplingParams
from sgcli.engine.sequence import SequenceState


@pytest.fixture(scope="module")
def free(smol_tokenizer):
    return get_backend("none").compile(ConstraintSpec(Kind.NONE, "", None), smol_tokenizer.vocab)


def text_of(vocab, ids: list[int]) -> str:
    return b"".join(vocab.tokens[i] for i in ids).decode("utf-8")


def feed(seq: SequenceState, ids: list[int]) -> list:
    """Take `ids` until the sequence ends; the events, then the flushed tail, as a list."""
    events = []
    for token in ids:
        events.append(seq.take(token))
        if seq.done:
            break
    return [e for e in [*events, seq.flush()] if e is not None]


def test_a_stop_string_cuts_the_output_and_is_never_streamed(free, smol_tokenizer):
    ids = smol_tokenizer.vocab.encode("Hello world, and goodbye")
    seq = SequenceState(free, SamplingParams(), max_tokens=50, stop=("world",))
    events = feed(seq, ids)
    streamed = "".join(e.text for e in events)
    assert (seq.reason, seq.text, streamed) == ("stop", "Hello ", "Hello ")
    assert len(seq.ids) < len(ids)  # the tokens after the stop string were never taken


def test_text_that_may_grow_into_a_stop_string_is_held_back(free, smol_tokenizer):
    ids = smol_tokenizer.vocab.encode("Hello wo")
    seq = SequenceState(free, SamplingParams(), max_tokens=50, stop=("world",))
    streamed = "".join(e.text for e in (seq.take(t) for t in ids) if e is not None)
    assert not seq.done and streamed == "Hello " and seq.text == "Hello wo"
    assert seq.flush().text == "wo"  # at the end, what was held back is shown


def test_the_token_budget_ends_in_length(free, smol_tokenizer):
    ids = smol_tokenizer.vocab.encode("one two three four five six")
    seq = SequenceState(free, SamplingParams(), max_tokens=3)
    feed(seq, ids)
    finished = seq.finished(prompt_tokens=4, forward_passes=3)
    assert (finished.finish_reason, finished.completion_tokens) == ("length", 3)
    assert finished.output == text_of(smol_tokenizer.vocab, ids[:3])


def test_a_stop_token_ends_the_output_without_being_recorded(free, smol_tokenizer):
    stop_id = next(iter(smol_tokenizer.vocab.stop_ids))
    seq = SequenceState(free, SamplingParams(), max_tokens=50)
    feed(seq, [*smol_tokenizer.vocab.encode("Hi"), stop_id, *smol_tokenizer.vocab.encode(" there")])
    assert (seq.reason, seq.text, seq.error) == ("stop", "Hi", None)
    assert stop_id not in seq.ids


def test_thinking_ends_at_the_marker_then_the_output_begins(free, smol_tokenizer):
    vocab = smol_tokenizer.vocab
    seq = SequenceState(free, SamplingParams(), max_tokens=50, think_end="</think>")
    events = feed(seq, vocab.encode("let me see</think>") + vocab.encode("42"))
    phases = [e.phase for e in events]
    assert phases[0] == "reasoning" and phases[-1] == "output" and phases == sorted(phases, reverse=True)
    assert (seq.reasoning, seq.text, seq.thinking) == ("let me see", "42", False)


def test_a_stop_token_while_thinking_is_an_error_without_a_budget(free, smol_tokenizer):
    stop_id = next(iter(smol_tokenizer.vocab.stop_ids))
    seq = SequenceState(free, SamplingParams(), max_tokens=50, think_end="</think>")
    feed(seq, [*smol_tokenizer.vocab.encode("hmm"), stop_id])
    assert seq.reason == "stop" and "before the end-of-thinking marker" in seq.error


def test_the_thinking_budget_forces_the_marker(free, smol_tokenizer):
    vocab = smol_tokenizer.vocab
    seq = SequenceState(free, SamplingParams(), max_tokens=50, think_end="</think>", think_budget=2)
    assert seq.force_think_end() == ([], [])  # under budget: nothing forced
    for token in vocab.encode("a long thought")[:2]:
        seq.take(token)
    marker, events = seq.force_think_end()
    assert text_of(vocab, marker) == "</think>"
    assert [e.phase for e in events] == ["reasoning"] * len(marker)
    assert (seq.thinking, seq.think_forced, seq.done) == (False, True, False)
    assert seq.reasoning == text_of(vocab, vocab.encode("a long thought")[:2]) and seq.ids[-len(marker) :] == marker


class _Failed:
    """A matcher as llguidance leaves one past its parser limits ("Too many items (limit 50000; mask)",
    met on transformers-CFG's SMILES grammars): in an error state it allows only the end of text, and
    takes it."""

    def __init__(self, vocab):
        self.vocab, self.error = vocab, "parser error: Too many items (limit 50000; mask)"

    def fill_mask(self, bitmask) -> None:
        bitmask.fill(0)
        stop = self.vocab.eos_id  # llguidance's tokenizer knows one end token
        bitmask[stop // 32] |= 1 << (stop % 32)

    def accept(self, token_id: int) -> bool:
        return True

    def can_stop(self) -> bool:
        return False

    def is_terminated(self) -> bool:
        return True


def test_a_matcher_in_an_error_state_ends_in_error_not_stop(free, smol_tokenizer):
    """It allowed only the end of text, so the sequence took it and finished "stop" with the error
    nowhere in the record; the output then failed the grammar's independent check as if the model
    had stopped early."""

    class Compiled:
        vocab = smol_tokenizer.vocab

        def matcher(self):
            return _Failed(self.vocab)

    seq = SequenceState(Compiled(), SamplingParams(), max_tokens=10)
    allowed = seq.allowed()
    assert allowed.count == 1
    token = seq.choose(allowed, None, masker=None)
    seq.take(token)
    assert (seq.done, seq.reason) == (True, "error")
    assert "Too many items" in seq.error


def test_a_prompt_ending_in_the_marker_starts_the_output_not_the_thinking(free, smol_tokenizer):
    vocab = smol_tokenizer.vocab
    prompt = vocab.encode("<think>\n\n</think>\n\n")
    seq = SequenceState(free, SamplingParams(), max_tokens=50, think_end="</think>", prompt_ids=prompt)
    feed(seq, vocab.encode("42"))
    assert (seq.thinking, seq.prompt_ended_thinking, seq.text, seq.reasoning) == (False, True, "42", "")
    opened = SequenceState(free, SamplingParams(), max_tokens=50, think_end="</think>", prompt_ids=prompt[:-3])
    assert opened.thinking and not opened.prompt_ended_thinking


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar", "outlines_core"])
@pytest.mark.parametrize(("pattern", "reason"), [("[0-9]", "stop"), ("[0-9]+", "length")])
def test_the_budgets_last_token_ends_in_stop_where_only_a_stop_token_could_follow(
    smol_tokenizer, backend, pattern, reason
):
    # xgrammar and outlines-core say is_terminated only once the stop token is accepted, llguidance as soon
    # as nothing else may follow: a complete output at the budget was called cut off on the first two
    compiled = get_backend(backend).compile(ConstraintSpec(Kind.REGEX, pattern, "--regex"), smol_tokenizer.vocab)
    seq = SequenceState(compiled, SamplingParams(), max_tokens=1)
    feed(seq, smol_tokenizer.vocab.encode("5"))
    finished = seq.finished(prompt_tokens=1, forward_passes=1)
    assert (finished.finish_reason, finished.output, finished.grammar_complete) == (reason, "5", True)
