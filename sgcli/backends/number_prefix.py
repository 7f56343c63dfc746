"""Whether an integer being written can still meet its schema's bounds, judged on its digits so far.

The checker asks this only where the grammar lets the number grow by digits alone (no fraction, no
exponent), so each digit multiplies it by ten: a number already past a bound only moves further away
(outlines-core's integer grew `4044444...` past `maximum` 99 until --max-tokens), and one whose every
continuation misses the bounds ("3" under [500, 510]: 3, 30-39, 300-399, then past 510; outlines-core
wrote "3046" after 64 backtracks) is a dead end as well.
"""

from __future__ import annotations

import math

BOUNDS = frozenset({"maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"})
_MAX_DIGITS = 400  # past any bound a double holds (and Python's 4,300-digit int() limit)


def digits_refused(nodes: list[tuple[str, dict]], raw: bytes) -> str | None:
    """Why an integer whose digits so far are `raw` can meet the bounds of one of `nodes` ((pointer,
    subschema) pairs) no more, however many digits follow; None where it still can."""
    negative = raw[:1] == b"-"
    digits = raw[1:] if negative else raw
    if not digits.isdigit() or digits[:1] == b"0" or not nodes:
        return None
    long = len(digits) > _MAX_DIGITS
    start = int(b"9" * _MAX_DIGITS if long else digits)
    value = -start if negative else start
    for p, node in nodes:
        for key, past in (
            ("maximum", lambda bound: not negative and value > bound),
            ("exclusiveMaximum", lambda bound: not negative and value >= bound),
            ("minimum", lambda bound: negative and value < bound),
            ("exclusiveMinimum", lambda bound: negative and value <= bound),
        ):
            bound = node.get(key)
            if _number(bound) and past(bound):
                return f"past `{key}` {bound} at {p or '/'}"
    if long:
        return None
    for p, node in nodes:
        low, high = integer_bounds(node)
        if negative:  # -m within [low, high] is m within [-high, -low]
            low, high = (None if high is None else -high), (None if low is None else -low)
        if not digits_reach(start, low, high):
            shown = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
            return (
                f"starting {'-' if negative else ''}{start}, no integer more digits make is within the bounds "
                f"at {p or '/'} (its magnitude must be in {shown})"
            )
    return None


def integer_bounds(node: dict) -> tuple[int | None, int | None]:
    """The least and greatest integers `node`'s numeric bounds allow (None: unbounded); draft 4's boolean
    `exclusiveMinimum`/`exclusiveMaximum` is read as inclusive (looser: never a wrong "dead")."""
    lows, highs = [], []
    if _number(node.get("minimum")):
        lows.append(math.ceil(node["minimum"]))
    if _number(node.get("exclusiveMinimum")):
        lows.append(math.floor(node["exclusiveMinimum"]) + 1)
    if _number(node.get("maximum")):
        highs.append(math.floor(node["maximum"]))
    if _number(node.get("exclusiveMaximum")):
        highs.append(math.ceil(node["exclusiveMaximum"]) - 1)
    return (max(lows) if lows else None), (min(highs) if highs else None)


def digits_reach(start: int, low: int | None, high: int | None) -> bool:
    """Whether some k >= 0 puts [start·10^k, (start+1)·10^k - 1] (start > 0) within [low, high]."""
    if high is None:
        return True  # enough digits pass any lower bound
    scale = 1
    while start * scale <= high:
        if low is None or (start + 1) * scale - 1 >= low:
            return True
        scale *= 10
    return False


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
