"""The range of each numeric setting, one definition for the flags, the environment and the config file.

Below the settings' readers (`config`, `limits`, the CLI's flag checks), so each refuses the same values
with the same words: exit 2 naming the flag, its environment variable and the range.
"""

from __future__ import annotations

import math

from sgcli.errors import UserError

# The largest value each numeric setting takes (0 turns a limit off): above these a value means
# nothing more, and some overflow what they reach (a read of limit + 1 bytes, the watchdog's clock,
# RLIMIT_AS in bytes, torch's thread pool, which crashes at 100,000 threads).
MAXIMA = {
    "compile-timeout": 1e6,  # seconds, ~11.6 days
    "compile-memory": 1 << 30,  # MB, a petabyte
    "max-constraint-bytes": 1 << 40,
    "max-prompt-bytes": 1 << 40,
    "threads": 1024,
}


def check_setting(name: str, value: float, *, least: float = 0) -> None:
    """`--name value` within [least, MAXIMA[name]] and a number (NaN passes every comparison), or exit 2
    naming the flag, its environment variable and the range."""
    high = MAXIMA[name]
    if math.isfinite(value) and least <= value <= high:
        return
    shown = [f"{int(x):,}" if float(x).is_integer() else f"{x:g}" for x in (least, high)]
    if value < least:
        why = "must not be negative" if least == 0 else f"must be at least {shown[0]}"
    elif math.isnan(value):  # NaN passes no comparison
        why = "is not a number"
    else:
        why = f"is more than the largest allowed, {shown[1]}"
    zero = "; 0 turns it off" if least == 0 else ""
    env = "SGCLI_" + name.replace("-", "_").upper()
    raise UserError(f"--{name} {value} {why} (also {env})", hint=f"give a number from {shown[0]} to {shown[1]}{zero}")
