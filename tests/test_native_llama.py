"""The native Llama forward (sgcli.engine.llama) against transformers' LlamaForCausalLM.

Both run the same weights: random Llamas saved to a folder as any checkpoint is. The native model
must give transformers' logits in every shape the engine feeds (a prompt, cached single steps,
a cropped draft, left- and right-padded rows with explicit positions), the same records through
the single loop and through batching, and say so (`model_impl`); what it cannot compute exactly
goes to transformers under auto and is exit 2 when asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from sgcli.engine.loader import load_model
from sgcli.errors import UserError
from sgcli.models.refs import resolve_model


def _checkpoint(folder, vocab_size: int, *, tied: bool, kv_heads: int, scale: float = 0.3):
    from helpers import random_llama

    lm = random_llama(vocab_size, "twin", initializer_range=scale, tied=tied)
    if kv_heads != lm.model.config.num_key_value_heads:  # a model with as many key/value heads as queries
        from dataclasses import replace

        from transformers import LlamaForCausalLM

        from sgcli.engine.runtime import TransformersRuntime

        lm.model.config.num_key_value_heads = kv_heads
        torch.manual_seed(99)
        lm = replace(lm, runtime=TransformersRuntime(LlamaForCausalLM(lm.model.config).eval()))
    lm.model.save_pretrained(folder)
    return lm


@pytest.fixture(scope="module", params=[(False, 1), (True, 2)], ids=["untied-gqa", "tied-mha"])
def twins(request, tmp_path_factory, smol_tokenizer):
    """(transformers' model, the native model) on one random checkpoint."""
    tied, kv_heads = request.param
    folder = tmp_path_factory.mktemp("twin")
    reference = _checkpoint(folder, len(smol_tokenizer.vocab), tied=tied, kv_heads=kv_heads)
    native = load_model(resolve_model(str(folder)), device="cpu", impl="native")
    assert (native.impl, reference.impl) == ("native", "transformers")
    return reference, native, folder


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()


def _logits(lm, ids, cache, **padding):
    """The logits of one pass as the engine computes them: the runtime's body, then its head."""
    hidden, _ = lm.runtime.hidden(ids, cache, use_cache=cache is not None, **padding)
    return lm.runtime.head().logits(hidden)


def test_logits_equal_transformers_in_every_shape_the_engine_feeds(twins):
    reference, native, _ = twins
    hf, ours = reference.runtime, native.runtime
    ids = torch.tensor([[5, 17, 900, 42, 7, 7, 3000, 11]])
    with torch.inference_mode():
        _close(native.model(input_ids=ids).logits, reference.model(input_ids=ids).logits)  # a whole prompt
        _close(ours.logits(ids, None, 3)[0], hf.logits(ids, None, 3)[0])  # the model's own, last positions
        theirs, mine = hf.new_cache(), ours.new_cache()
        _close(_logits(native, ids[:, :5], mine), _logits(reference, ids[:, :5], theirs))
        for t in range(5, 8):  # cached single steps
            step = ids[:, t : t + 1]
            _close(_logits(native, step, mine), _logits(reference, step, theirs))
        draft = torch.tensor([[8, 9, 10]])  # a draft fed in one pass, then two of its tokens dropped
        _close(_logits(native, draft, mine), _logits(reference, draft, theirs))
        mine.crop(-2)
        theirs.crop(-2)
        step = torch.tensor([[12]])
        _close(_logits(native, step, mine), _logits(reference, step, theirs))
        # rows padded on the left (a shorter prompt) and on the right (a shorter feed), explicit positions
        rows = torch.tensor([[0, 0, 5, 17, 900, 42], [5, 17, 900, 42, 7, 0]])
        mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
        positions = torch.tensor([[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]])
        got = _logits(native, rows, None, attention_mask=mask, position_ids=positions)
        want = _logits(reference, rows, None, attention_mask=mask, position_ids=positions)
        assert torch.isfinite(got).all()  # padding positions attend to nothing, yet stay finite
        _close(got[0, 2:], want[0, 2:])
        _close(got[1, :5], want[1, :5])


def _records(lm, tokenizer, prompts, *, batch: bool):
    from sgcli.backends import check_supports
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}}}
    schema["required"] = ["a", "n"]
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "t", json_options=JsonOptions(whitespace="compact"))
    compiled = check_supports("llguidance", spec).compile(spec, tokenizer.vocab.padded(lm.logits_width))
    session = Session(lm, tokenizer, compiled, SamplingParams(0.0, seed=3), 24, (), PromptOptions(system="Be brief."))
    requests = [Request(f"r{i}", p) for i, p in enumerate(prompts)]
    if batch:
        session.jump_forward = False  # the batch's records are the plain loop's
        return list(session.batch(requests, batch_size=3))
    return [list(session.stream(r))[-1].record for r in requests]


PROMPTS = ["Capital of France?", "x", "Tell me about the number seven, please.", "Hi", "One more."]


def test_records_match_transformers_single_and_batched(twins, smol_tokenizer):
    reference, native, _ = twins
    expected = [r["output"] for r in _records(reference, smol_tokenizer, PROMPTS, batch=False)]
    assert [r["output"] for r in _records(native, smol_tokenizer, PROMPTS, batch=False)] == expected
    batched = _records(native, smol_tokenizer, PROMPTS, batch=True)
    assert [r["output"] for r in batched] == expected
    assert {r["model_impl"] for r in batched} == {"native"}
    assert len({r["usage"]["completion_tokens"] for r in batched}) > 1  # rows really differ


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def test_what_the_native_forward_cannot_compute_goes_to_transformers_or_is_refused(tmp_path, smol_tokenizer):
    _checkpoint(tmp_path, len(smol_tokenizer.vocab), tied=False, kv_heads=1)
    _edit_config(tmp_path, rope_parameters={"rope_type": "proportional", "rope_theta": 10000.0, "factor": 2.0})
    ref = resolve_model(str(tmp_path))
    lm = load_model(ref, device="cpu")
    assert lm.impl == "transformers" and "proportional rope scaling" in lm.impl_reason  # auto: said, not silent
    with pytest.raises(UserError) as caught:
        load_model(ref, device="cpu", impl="native")
    assert "proportional rope scaling" in caught.value.message and "--model-impl transformers" in caught.value.hint


def test_a_missing_weight_is_named(tmp_path, smol_tokenizer):
    from safetensors.torch import load_file, save_file

    _checkpoint(tmp_path, len(smol_tokenizer.vocab), tied=False, kv_heads=1)
    weights = load_file(str(tmp_path / "model.safetensors"))
    del weights["model.layers.1.mlp.down_proj.weight"]
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(UserError) as caught:
        load_model(resolve_model(str(tmp_path)), device="cpu", impl="native")
    assert "model.layers.1.mlp.down_proj.weight is missing" in caught.value.message


def test_the_cli_flag_reaches_the_record(run_cli, twins, tmp_path, smol_tokenizer):
    import shutil
    from pathlib import Path

    _, _, folder = twins
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(Path(smol_tokenizer.vocab.source).parent / name, folder / name)
    impls = {}
    for impl in ("auto", "transformers"):
        out = tmp_path / f"{impl}.jsonl"
        args = [
            "generate",
            "--model",
            folder,
            "--regex",
            "[a-z]{3}",
            "-n",
            "5",
            "--model-impl",
            impl,
            "--json",
            "-o",
            out,
            "hi",
        ]
        assert run_cli(*args).exit_code == 0
        record = json.loads(out.read_text().splitlines()[0])
        impls[impl] = (record["model_impl"], record["output"], record["valid"])
    assert impls["auto"][0] == "native" and impls["transformers"][0] == "transformers"
    assert impls["auto"][1:] == impls["transformers"][1:] and impls["auto"][2] is True


def test_a_native_run_never_imports_transformers_model_code(twins):
    _, _, folder = twins
    script = (
        "import sys, torch\n"
        "from sgcli.engine.loader import load_model\n"
        "from sgcli.models.refs import resolve_model\n"
        f"lm = load_model(resolve_model({str(folder)!r}), device='cpu')\n"
        "with torch.inference_mode(): lm.model(input_ids=torch.tensor([[1, 2, 3]]))\n"
        "print(lm.impl, sorted(m for m in sys.modules if m.startswith('transformers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[0] == "native"
    assert "transformers" not in out.stdout.split(" ", 1)[1], out.stdout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_and_rotary_embedding_are_transformers_values_bit_for_bit(dtype):
    """The fused RMSNorm and the one-roll rotation are rewrites of transformers' arithmetic, not
    approximations: equal bit for bit, in both dtypes the CPU runs."""
    from transformers.models.llama import modeling_llama as hf

    from sgcli.engine.llama import RMSNorm, _rotate, rotary_tables

    torch.manual_seed(3)
    x = (torch.randn(3, 5, 64) * torch.rand(64) * 10).to(dtype)
    ours, theirs = RMSNorm(64, 1e-5), hf.LlamaRMSNorm(64, eps=1e-5)
    ours.weight = torch.nn.Parameter(torch.randn(64).to(dtype), requires_grad=False)
    theirs.weight = torch.nn.Parameter(ours.weight.clone(), requires_grad=False)
    assert torch.equal(ours(x), theirs(x))

    q, k = torch.randn(3, 4, 5, 64).to(dtype), torch.randn(3, 2, 5, 64).to(dtype)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [400, 401, 402, 403, 2000]])
    rope = hf.LlamaRotaryEmbedding(hf.LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64))
    expected_q, expected_k = hf.apply_rotary_pos_emb(q, k, *rope(q, positions))  # q: only its dtype is read
    cos, signed_sin = rotary_tables(positions, rope.inv_freq, dtype)
    assert torch.equal(_rotate(q, cos, signed_sin), expected_q)
    assert torch.equal(_rotate(k, cos, signed_sin), expected_k)
