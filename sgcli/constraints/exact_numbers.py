"""`multipleOf` as the numbers are written, not as floats divide them.

jsonschema divides in floats: 0.3 / 0.1 is 2.9999999999999996, so 0.3, 0.6, 0.7 and 1.2 were "not a
multiple of 0.1": a server's `{"f": 0.3}` was reported invalid, and the decode-loop checker (which
enforces a fractional `multipleOf` for every backend) refused them while generating. JSON Schema
means the division of the numbers themselves: each is read here as the shortest decimal that gives
back its float (what `repr` prints, what the JSON text said for any number of up to 15 digits), and
divided exactly, with fractions.
"""

from __future__ import annotations

from fractions import Fraction


def is_multiple(instance: int | float, divisor: int | float) -> bool | None:
    """Whether `instance` divided by `divisor` is an integer, in exact decimal arithmetic (None: not
    finite numbers, which the caller judges as jsonschema does)."""
    try:
        quotient = _exact(instance) / _exact(divisor)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    return quotient.denominator == 1


def _exact(number: int | float) -> Fraction:
    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))


def multiple_of(validator, divisor, instance, schema):
    """jsonschema's `multipleOf` keyword, exact where the numbers are finite."""
    from jsonschema import ValidationError
    from jsonschema._keywords import multipleOf

    if not validator.is_type(instance, "number") or not validator.is_type(divisor, "number"):
        yield from multipleOf(validator, divisor, instance, schema)
        return
    exact = is_multiple(instance, divisor)
    if exact is None:
        yield from multipleOf(validator, divisor, instance, schema)
    elif not exact:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")
