"""How tokens are picked and when a generation stops: one model for the CLI, the engine and servers.

The in-process sampler (`sgcli.engine.sampling`) reads temperature, top_p, top_k and seed; a
server dialect (`sgcli.serving`) sends every field; `sgcli generate` takes it as its sampling
flag group. `check()` refuses a value out of range before anything loads (exit 2, not exit 3
mid-decode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sgcli.errors import UserError

MAX_TEMPERATURE = 100.0  # far past the point where sampling is uniform over the allowed tokens
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = 0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()  # stop when one of these strings appears
    repetition_guard: bool = True  # end an output stuck repeating one span (in-process models only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop or ()))  # a repeatable flag gives a list, or None

    def record(self, system: str | None = None) -> dict:
        """The record's `sampling`: these values as given, and the system prompt (`system`)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "system": system,
        }

    def check(self) -> None:
        """Every field in range, or a UserError naming the flag and its range."""
        if not math.isfinite(self.temperature) or not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise UserError(
                f"--temperature {self.temperature} is out of range",
                hint=f"give a number from 0 (greedy) to {MAX_TEMPERATURE:g}, e.g. --temperature 0.7",
            )
        if not math.isfinite(self.top_p) or not 0 < self.top_p <= 1:
            raise UserError(f"--top-p {self.top_p} is out of range", hint="give a number in (0, 1], e.g. --top-p 0.9")
        if self.top_k < 0:
            raise UserError(
                f"--top-k {self.top_k} is negative", hint="give 0 (off) or a positive count, e.g. --top-k 40"
            )
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise UserError(f"--seed {self.seed} is out of range", hint=f"give an integer from 0 to {MAX_SEED}")
        if self.max_tokens < 1:
            raise UserError(f"--max-tokens {self.max_tokens}: must be at least 1", hint="e.g. --max-tokens 256")
