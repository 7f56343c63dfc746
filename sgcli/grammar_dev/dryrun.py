"""The masks dry run: step a grammar's matcher through a text's tokens, no model needed.

At every step it records what the decode loop would see: how many tokens the mask
allows, a readable sample of them, the forced continuation (jump-forward bytes), and
whether the text's own token is allowed. Where the text leaves the grammar, a byte-by-byte
probe finds the exact byte and what the grammar wanted there.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field

from sgcli.backends.base import Compiled, allowed_ids, new_bitmask
from sgcli.backends.matching import byte_ids, canonical_ids, feed, first_mask_error, walk
from sgcli.constraints.spec import Kind
from sgcli.tokenizers.vocab import Vocab
from sgcli.validation.validate import validate
from sgcli.validation.verdict import Verdict

ACCEPTED, PREFIX, REJECTED, START, ERROR = "accepted", "prefix", "rejected", "start", "error"


@dataclass
class State:
    """The matcher's view before a token: what it allows and what it forces."""

    n_allowed: int
    sample: list[int]  # token ids, most readable first
    forced: bytes
    can_stop: bool


@dataclass
class Step:
    index: int  # token index in the text
    token: int
    piece: bytes
    offset: int  # byte offset in the text where the token starts
    allowed: bool
    before: State


@dataclass
class Rejection:
    token_index: int
    token: int
    piece: bytes
    token_offset: int  # where the rejected token starts in the text (bytes)
    byte_offset: int  # the first byte of the text the grammar does not allow
    next_bytes: str  # the bytes the grammar allowed at byte_offset, as a character class
    allowed: State  # what the mask allowed in place of the token
    note: str | None = None
    can_stop_at_byte: bool = False  # whether the grammar could stop right before byte_offset


@dataclass
class DryRun:
    backend: str
    text: str | None
    tokens: list[int]
    steps: list[Step] = field(default_factory=list)
    end: State | None = None  # the state after the last accepted token
    rejection: Rejection | None = None
    note: str | None = None
    error: str | None = None  # the matcher failed at step len(steps): no verdict on the text
    error_state: State | None = None  # what the failed matcher's mask showed there
    # the independent check's verdict on a TEXT the matcher accepted or rejected (sgcli.validation)
    independent: Verdict | None = None
    refused_valid: str | None = None  # where a valid TEXT is rejected: why (`refused_valid_note`)

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return ERROR
        if self.rejection is not None:
            return REJECTED
        if self.text is None:
            return START
        return ACCEPTED if self.end is not None and self.end.can_stop else PREFIX


def readable_order(vocab: Vocab, ids) -> list[int]:
    """Allowed ids, most readable first: printable UTF-8 before raw bytes, short before long,
    then by id (lower ids are earlier, i.e. more frequent, BPE merges)."""

    def key(i: int):
        piece = vocab.tokens[i]
        try:
            text = piece.decode("utf-8")
            odd = not text.isprintable() and text not in (" ", "\n", "\t")
        except UnicodeDecodeError:
            odd = True
        return (i in vocab.special_ids, odd, len(piece) == 0, len(piece), i)

    return sorted((int(i) for i in ids), key=key)


def _state(compiled: Compiled, matcher, mask, top: int) -> State:
    """The state `mask` (just filled) and `matcher` show."""
    ids = allowed_ids(mask, len(compiled.vocab))
    return State(int(len(ids)), readable_order(compiled.vocab, ids)[:top], matcher.jump_forward(), matcher.can_stop())


def dry_run(compiled: Compiled, text: str | None, *, top: int = 10) -> DryRun:
    """Step `compiled` through the tokens of `text` (None: just the first step), following the mask."""
    vocab = compiled.vocab
    failed = first_mask_error(compiled)  # as the bounded compile saw it: a matcher that panicked there is spent
    if failed is not None:
        import numpy as np

        step = compiled.first_step()
        ids = allowed_ids(np.frombuffer(step.mask, dtype=np.int32), len(vocab))
        state = State(int(len(ids)), readable_order(vocab, ids)[:top], b"", step.can_stop)
        return DryRun(compiled.backend, text, [], error=failed, error_state=state)
    matcher = compiled.matcher()
    mask = new_bitmask(len(vocab))
    states: list[State] = []

    def record(index: int, token: int | None) -> None:
        states.append(_state(compiled, matcher, mask, top))

    if text is None:
        w = walk(matcher, [], mask, on_state=record)
        if w.error is not None:
            return DryRun(compiled.backend, None, [], error=w.error, error_state=states[-1])
        return DryRun(compiled.backend, None, [], end=states[-1])
    ids = canonical_ids(vocab, text)
    run = DryRun(compiled.backend, text, ids)
    data = text.encode("utf-8")
    if b"".join(vocab.tokens[i] for i in ids) != data:
        unwritable = sorted({f"0x{b:02x}" for b in data if vocab.longest_match(bytes([b])) is None})
        missing = f" (no token writes {', '.join(unwritable[:4])})" if unwritable else ""
        run.note = (
            f"no tokens of this vocabulary spell TEXT{missing}: no model using it writes it; offsets follow the tokens"
            if vocab.longest_match(data) is None
            else "the tokens do not spell TEXT byte for byte; offsets follow the tokens"
        )
    w = walk(matcher, ids, mask, follow_mask=True, on_state=record)
    offsets = list(itertools.accumulate((len(vocab.tokens[t]) for t in ids), initial=0))
    for index in range(len(w.in_mask)):
        token = ids[index]
        run.steps.append(Step(index, token, vocab.tokens[token], offsets[index], index < w.taken, states[index]))
    if w.refused == "error":
        run.error, run.error_state = w.error, states[-1]
        return run
    if w.refused is None:
        run.end = states[-1]
        _judge(compiled, run)
        return run
    run.rejection, through = _locate(compiled, ids, w.taken, offsets[w.taken], states[w.taken], top)
    if through is not None:  # llguidance's mask allows only its own split of forced text ("ab" for TEXT "a")
        token = token_text(vocab, ids[w.taken])
        run.end, run.note = through, f"token {w.taken} {token}: {_SPLIT_DIFFERENTLY}; every byte of TEXT is allowed"
    elif w.inconsistent:
        run.rejection.note = f"{compiled.backend}: the mask allows this token but accept() refused it"
    _judge(compiled, run)
    return run


def _judge(compiled: Compiled, run: DryRun) -> None:
    """The independent check's verdict on a whole TEXT the matcher accepted or rejected: where the two
    differ, the backend's language is not the constraint's (a valid text spelled a way its grammar never
    writes, like `"\u0041"`; an invalid one a keyword it does not enforce lets through)."""
    if run.verdict in (ACCEPTED, REJECTED):
        run.independent = independent_verdict(compiled, run.text)
    if run.verdict == REJECTED and run.independent is not None and run.independent.valid:
        run.refused_valid = refused_valid_note(compiled, run.text, run.independent.validated_by)


def refused_valid_note(compiled: Compiled, text: str, validated_by: str) -> str:
    """Why a backend's grammar refuses a text the independent check finds valid. JSON has many spellings of
    one value and grammars write one: where the compact spelling of the value is taken, that is the story,
    and the note shows it; where it is refused too, the grammar is narrower than the schema there (it
    said "another spelling" of `4.9` under outlines-core's top-level number, which has none: a tour). A
    regex or grammar text has one spelling, so there the backend reads the constraint otherwise."""
    backend, kind = compiled.backend, compiled.spec.kind
    if kind not in (Kind.REGEX, Kind.CHOICE, Kind.EBNF):  # JSON may stand inside (Lark's %json)
        compact = _compact_spelling(text) if kind is Kind.JSON_SCHEMA else None
        if compact is None:
            return (
                f"{validated_by} finds the input valid, and {backend}'s grammar refuses this spelling of it: "
                "generation never writes it so (backends write some values one way only: string escapes, number "
                "forms, whitespace, the schema's property order; where the grammar has no other, not at all)"
            )
        if compact != text and feed(compiled, compiled.vocab.encode(compact)).accepted:
            return (
                f"{validated_by} finds the input valid, and {backend}'s grammar refuses this spelling of it: it "
                f"takes {json.dumps(compact, ensure_ascii=False)[:200]} (backends write some values one way only: "
                "string escapes, number forms, whitespace)"
            )
        return (
            f"{validated_by} finds the input valid, and {backend}'s grammar refuses it, written compactly too: "
            "the grammar is narrower than the schema here (or writes the properties in the schema's order), so "
            "generation never writes this value (docs/guarantee.md lists each backend's known narrowings)"
        )
    return (
        f"the independent check ({validated_by}) matches the text, and {backend} refuses it: it reads this "
        f"{kind.label} otherwise, and generation never writes such a text there (docs/grammar-development.md "
        "lists the known readings; `sgcli compare-backends --no-generate --text` puts the backends side by side)"
    )


def _compact_spelling(text: str) -> str | None:
    """The value `text` spells, written compactly as generation's default layout writes it (None: not JSON)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def independent_verdict(compiled: Compiled, text: str) -> Verdict:
    """The check `generate` gives its outputs, on a whole `text`, reading regexes as `compiled`'s backend does."""
    from sgcli.backends import get_backend

    dialect = get_backend(compiled.backend).capabilities.regex_dialect
    return validate(compiled.spec, text, finish_reason="stop", grammar_complete=True, dialect=dialect)


_SPLIT_DIFFERENTLY = (
    "every byte of this token is allowed, but not this token: the grammar wants the text split differently"
)


def _locate(
    compiled: Compiled, ids: list[int], index: int, offset: int, before: State, top: int
) -> tuple[Rejection | None, State | None]:
    """Replay up to the rejected token, then feed the rest of the text byte by byte to find the failing
    byte: (the rejection, None), or (None, the state after TEXT) where the grammar takes every byte of it."""
    vocab = compiled.vocab
    piece = vocab.tokens[ids[index]]
    rest = b"".join(vocab.tokens[i] for i in ids[index:])
    matcher = compiled.matcher()
    walk(matcher, ids[:index])
    mask = new_bitmask(len(vocab))  # left holding the state before the failing byte (or after the last)
    singles = byte_ids(vocab, rest) or []
    stops: list[bool] = []  # before each byte: whether the text could end there (asked before a refusal,
    # which may leave the matcher failed: llguidance's)
    good = walk(matcher, singles, mask, on_state=lambda *_: stops.append(matcher.can_stop())).taken
    if singles and good == len(singles):
        return None, _state(compiled, matcher, mask, top)
    note = _SPLIT_DIFFERENTLY if good >= len(piece) else None
    pieces = [vocab.tokens[i] for i in allowed_ids(mask, len(vocab)) if vocab.tokens[i] and i not in vocab.special_ids]
    firsts = {p[0] for p in pieces}
    if good < len(piece) and piece[good] in firsts:
        # The backend refused the lone byte yet allows tokens starting with it (outlines-core after an
        # accepting state refuses "\xc3", a byte-level split of "é"): blaming that byte would contradict
        # `next_bytes`, so the first bad byte is where the allowed tokens part from this token's bytes.
        tail = piece[good:]
        shared = max(_common_prefix(tail, p) for p in pieces)
        firsts = {p[shared] for p in pieces if len(p) > shared and p[:shared] == tail[:shared]}
        note = (
            f"{compiled.backend} refuses the lone byte {_byte_char(piece[good])} here (a split of one character "
            "into bytes) though it allows whole tokens starting with it; the first bad byte is read from those"
        )
        good += shared
        stops = []
        if good >= len(rest):  # TEXT ends inside tokens the backend allows: a prefix, not a rejection
            going_on = [i for i in allowed_ids(mask, len(vocab)) if vocab.tokens[i].startswith(tail)]
            return None, State(len(going_on), readable_order(vocab, going_on)[:top], b"", False)
        if good >= len(piece):
            note = _SPLIT_DIFFERENTLY
    if note == _SPLIT_DIFFERENTLY and good < len(rest):  # the text also goes wrong after this token
        note = (
            "every byte of this token is allowed, but not this token (the grammar wants its text split "
            f"differently); TEXT goes wrong after it anyway, at byte {offset + good}"
        )
    return Rejection(
        index,
        ids[index],
        piece,
        offset,
        offset + good,
        char_class(firsts),
        before,
        note,
        good < len(stops) and stops[good],
    ), None


def _common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def char_class(byte_values: set[int]) -> str:
    """{0x30..0x39, 0x2d} -> '[\\-0-9]': a compact, regex-like view of allowed next bytes."""
    if not byte_values:
        return "[]"
    values = sorted(byte_values)
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(
            _byte_char(start)
            if start == prev
            else _byte_char(start) + ("" if prev == start + 1 else "-") + _byte_char(prev)
        )
        if v is not None:
            start = prev = v
    return "[" + "".join(parts) + "]"


def _byte_char(b: int) -> str:
    named = {9: "\\t", 10: "\\n", 13: "\\r", 32: " "}
    if b in named:
        return named[b]
    if 33 <= b < 127:
        ch = chr(b)
        return "\\" + ch if ch in "\\]-^[" else ch
    return f"\\x{b:02x}"


def piece_text(piece: bytes) -> str:
    """A token's bytes as a quoted, escaped string for display: a byte that is not UTF-8 as backslash-x
    and two hex digits, an escape JSON never writes, so it differs from that text (its backslash doubled)."""
    quoted = json.dumps(piece.decode("utf-8", errors="surrogateescape"), ensure_ascii=False)
    return _STRAY_BYTE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", quoted)


def token_text(vocab: Vocab, token: int) -> str:
    """`piece_text` of a token, marked where it is special: Tekken's stop token `</s>` is no text `</s>`."""
    shown = piece_text(vocab.tokens[token])
    return f"{shown}(special)" if token in vocab.special_ids else shown


_STRAY_BYTE = re.compile("[\udc80-\udcff]")  # a byte surrogateescape could not decode


def to_records(run: DryRun, vocab: Vocab) -> list[dict]:
    """The JSONL trace: one record per step, then one summary record."""

    def piece(token: int, piece: bytes) -> dict:  # `text` readable; `hex` the exact bytes (as tokenizer inspect)
        return {"text": _text(piece), "hex": piece.hex(), "special": token in vocab.special_ids}

    def state(s: State) -> dict:
        return {
            "n_allowed": s.n_allowed,
            "can_stop": s.can_stop,
            "forced": _text(s.forced),
            "forced_hex": s.forced.hex(),
            "sample": [{"id": i, **piece(i, vocab.tokens[i])} for i in s.sample],
        }

    records = [
        {
            "type": "step",
            "index": s.index,
            "token": s.token,
            **piece(s.token, s.piece),
            "offset": s.offset,
            "allowed": s.allowed,
            **state(s.before),
        }
        for s in run.steps
    ]
    summary: dict = {"type": "summary", "backend": run.backend, "verdict": run.verdict, "tokens": len(run.tokens)}
    if run.end is not None:
        summary["end"] = state(run.end)
    if run.error is not None:
        summary["error"] = {"token_index": len(run.steps), "message": run.error, "mask": state(run.error_state)}
    if run.rejection is not None:
        r = run.rejection
        summary["rejected"] = {
            "token_index": r.token_index,
            "token": r.token,
            **piece(r.token, r.piece),
            "token_offset": r.token_offset,
            "byte_offset": r.byte_offset,
            "next_bytes": r.next_bytes,
            "can_stop_at_byte": r.can_stop_at_byte,
            "note": r.note,
            "allowed": state(r.allowed),
        }
    if run.note:
        summary["note"] = run.note
    if run.independent is not None:  # the verdict less the parsed value (the text is the step records')
        keys = ("valid", "validated_by", "errors", "unchecked")
        summary["independent"] = {k: getattr(run.independent, k) for k in keys}
    records.append(summary)
    return records


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")
