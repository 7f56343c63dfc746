"""Shared fixtures.

The constraint tests use a tiny *randomly initialised* Llama with the real SmolLM2
tokenizer: random logits try every token the mask lets through, which is a far better
adversary for a grammar backend than a trained model that mostly writes sensible JSON.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLOW_CASES = Path(__file__).with_name("slow_cases.txt")


def slow_cases() -> dict[str, float]:
    """The cases `make test` leaves to the slow stage (tests/slow_cases.txt): node id -> seconds measured."""
    out = {}
    for line in SLOW_CASES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, node = line.split(" ", 1)
            out[node] = float(seconds)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the cases listed in tests/slow_cases.txt `slow`, before `-m` selects."""
    listed = slow_cases()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)


# One torch thread per pytest-xdist worker (`make test` starts one worker per core). With torch's
# default of a thread per core in every worker, the workers' OpenMP threads spin against each other:
# on 2 cores the random-model and batching tests took 162 s against 34 s with one thread each. Set
# before any test module imports torch (OpenMP reads it once); a user's own setting is kept, and the
# CLI's default `--threads` honours it as it would in any process (sgcli.engine.threads).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def smol_tokenizer():
    from sgcli.tokenizers import load_tokenizer

    return load_tokenizer(None)


@pytest.fixture(scope="session")
def tiny_lm(smol_tokenizer):
    """A 2-layer random Llama whose logits width equals SmolLM2's vocabulary."""
    from helpers import random_llama

    return random_llama(len(smol_tokenizer.vocab))


@pytest.fixture(scope="session")
def sharp_lm(smol_tokenizer):
    """`tiny_lm`'s shape with larger random weights: its outputs depend on the prompt, so rows of one
    batch differ in length and finish at different steps (the batching tests' adversary)."""
    from helpers import random_llama

    return random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3)


@pytest.fixture(scope="session")
def sharp_native(smol_tokenizer):
    """`sharp_lm`'s weights in sgcli's own forward (its batches pack out padding and prefill joining
    rows inside their steps; transformers' take the other paths)."""
    from helpers import random_llama

    return random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3, impl="native")


@pytest.fixture(params=["transformers", "native"])
def any_lm(request):
    """`sharp_lm` on either runtime, for the tests each batching path must pass."""
    return request.getfixturevalue("sharp_lm" if request.param == "transformers" else "sharp_native")


@pytest.fixture
def run_cli():
    """Run `sgcli ...` in-process with typer's CliRunner; returns the result."""
    from typer.testing import CliRunner

    from sgcli.cli.app import app

    runner = CliRunner()

    def run(*args, input=None):
        return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)

    return run


@pytest.fixture(autouse=True, scope="session")
def _quiet_env():
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    yield
