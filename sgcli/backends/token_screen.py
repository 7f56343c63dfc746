"""Which allowed tokens the schema checker must decide one by one, and which its tables decide at once.

`CheckedMatcher.fill_mask` (`schema_checker`) runs a token through its incremental JSON reader only
where the outcome can differ from plain acceptance: in a string, the tokens with a quote (or, where
the string's content is checked as a prefix, the ones that are not plain pieces of text); in a
number, those that end it. Plain pieces inside a checked string (`maxLength`, `enum`/`const`, an
anchored `pattern`) are judged by the per-vocabulary tables of `json_strings` instead, a numpy
operation over every allowed id, by the same rules `string_dead` applies to one token.

`top` is the reader's innermost frame (a tuple: its kind, the offset where it starts, its schema
nodes, then kind-specific fields; for a string, whether it is a property name at index 4).
"""

from __future__ import annotations

from sgcli.backends.json_strings import StringRules, at_need, goes_on, pattern_blocked
from sgcli.backends.schema_plan import CheckPlan


def to_look_at(plan: CheckPlan, top: tuple, ids, rules: StringRules | None, current: str | None):
    """The allowed ids whose outcome can differ from plain acceptance here. `rules`: `CheckPlan.open_string_rules`;
    `current`: the open string's whole content so far (None where a character or escape is unfinished)."""
    import numpy as np

    tables = plan.tables
    if top[0] == "str":
        if rules is not None:
            if current is not None:
                return ids[tables.plain_len[ids] < 0]  # the plain ones: `refused_by_table`
            return ids  # a character or escape is unfinished: the grammar allows only what finishes it
        return np.union1d(ids[tables.has_quote[ids]], _allowed_stops(plan, ids))
    if top[0] == "num":
        return ids if plan.signed(plan.checks(top[2])) else ids[tables.ends_number[ids]]
    return ids


def _allowed_stops(plan: CheckPlan, ids):
    """The stop ids among `ids` (sorted, as a bitmask gives them): a binary search each, where
    `np.intersect1d` sorted all ~49k allowed ids of a free string again (5.6 ms a step)."""
    import numpy as np

    stops = np.fromiter(sorted(plan.stop_ids), dtype=np.int64, count=len(plan.stop_ids))
    if not len(stops) or not len(ids):
        return stops[:0]
    at = np.minimum(np.searchsorted(ids, stops), len(ids) - 1)
    return stops[ids[at] == stops]


def refused_by_table(tables, ids, rules: StringRules | None, current: str | None):
    """The plain pieces among `ids` that would break `rules` after the string's content `current`, as
    a numpy array (empty where there are no rules or the content is unfinished)."""
    import numpy as np

    if rules is None or current is None:
        return np.zeros(0, dtype=np.int64)
    plain = ids[tables.plain_len[ids] >= 0]
    dead = np.zeros(len(plain), dtype=bool)
    if rules.max_length is not None:
        dead |= tables.plain_len[plain] + len(current) > rules.max_length
        if rules.at_sign:
            dead |= _email_too_long(tables, plain, current, rules.max_length)
    tails = [i for i, t in enumerate(plain) if int(t) in tables.plain_tail] if rules.choices else []
    for choices in rules.choices:
        viable = set()
        for choice in choices:
            if choice.startswith(current):
                rest = choice[len(current) :]
                for k in range(len(rest) + 1):
                    viable.update(tables.by_text.get(rest[:k], ()))
        dead |= ~np.isin(plain, np.fromiter(viable, dtype=np.int64, count=len(viable)))
        for i in tails:  # pieces that end inside a character: is it the next one of some choice?
            t = int(plain[i])
            text = current + tables.plain_text[t]
            dead[i] = not any(goes_on(c, text, tables.plain_tail[t]) for c in choices)
    for p, closed in zip(rules.patterns, rules.ascii_closed):
        dead |= _pattern_dead(tables, plain, current, p, closed, dead)
    return plain[dead]


def _email_too_long(tables, plain, current: str, limit: int):
    """Which plain pieces leave an email no room within `limit` for the `@` and the character after it
    (`json_strings.at_need`, piece by piece: a piece's unfinished last character is no `@`)."""
    import numpy as np

    at, tail = tables.at_sign[plain], tables.tail[plain]
    text_len = tables.plain_len[plain] - tail
    if "@" in current:
        need = np.where(at == 2, 1, np.where(text_len > 0, 0, at_need(current)))
    else:
        need = np.where(at == 0, 2, np.where(at == 2, 1, 0))
    return len(current) + text_len + np.maximum(tail, need) > limit


def _pattern_dead(tables, plain, current: str, pattern, closed: bool, already):
    """Which plain pieces make the string a prefix no `pattern` match starts with. Pieces are judged by
    their first character first (one search per distinct character, none for a non-ASCII one where the
    pattern takes only ASCII), then prefix by prefix, each prefix searched once."""
    import numpy as np

    firsts = tables.first[plain]
    out = np.zeros(len(plain), dtype=bool)
    codes = np.unique(firsts[(firsts >= 0) & ~already])
    if closed:
        out |= firsts >= 0x80
        codes = codes[codes < 0x80]
    dead_codes = [c for c in codes.tolist() if pattern.search(current + chr(c), partial=True) is None]
    out |= np.isin(firsts, np.asarray(dead_codes, dtype=np.int64))
    dead: dict[str, bool] = {}
    for i in np.flatnonzero(~out & ~already):
        t = int(plain[i])
        text = tables.plain_text[t]
        for k in range(2, len(text) + 1):
            head = text[:k]
            known = dead.get(head)
            if known is None:
                known = dead[head] = pattern.search(current + head, partial=True) is None
            if known:
                out[i] = True
                break
        if not out[i] and t in tables.plain_tail:
            out[i] = (not text and pattern.search(current, partial=True) is None) or pattern_blocked(
                pattern, closed, current + text, tables.plain_tail[t], None
            )
    return out
