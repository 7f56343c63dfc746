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


@pytest.fixture(scope="session")
def smol_tokenizer():
    from sgcli.tokenizers import load_tokenizer

    return load_tokenizer(None)


@pytest.fixture(scope="session")
def tiny_lm(smol_tokenizer):
    """A 2-layer random Llama whose logits width equals SmolLM2's vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from sgcli.engine.loader import LoadedModel
    from sgcli.engine.models import ModelRef

    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=len(smol_tokenizer.vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    return LoadedModel(
        model, ModelRef("dir", "tiny-random-llama", "tiny-random-llama"), "cpu", "float32", config.vocab_size, 0.0
    )


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
