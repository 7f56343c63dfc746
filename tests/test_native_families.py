"""The native forward of every family it runs, against transformers' own classes on the same weights.

Each case is a tiny random checkpoint built from transformers' config class of its family (Llama
with each rope scaling, Mistral with a sliding window, Ministral's full and sliding layers also as a
mistral config.json with `layer_types` ships them, Qwen2 with and without sliding layers, Qwen3,
Gemma 2 and Gemma 3 with sliding and global layers and soft-capping), saved to a folder as any
checkpoint is and loaded by `load_model(impl="native")`. Its logits must be transformers'
through a prefill, cached single steps, a draft cropped and replaced, and batched passes with
left-padded rows, right-padded feeds and positions given explicitly: in float32 within 1e-5 (the
two differ only in the order of their sums), in bfloat16 and float16 within the bound `_BF16`
states. The windows and soft-caps are small enough to change the logits, and a test checks that
they do, so a forward that ignored them would fail.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from sgcli.engine import families
from sgcli.engine.loader import load_model
from sgcli.engine.runtime import TransformersRuntime
from sgcli.models.refs import resolve_model

SHAPE = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    initializer_range=0.1,
)
WINDOW = 5  # shorter than the sequences below: sliding layers see less than global ones
HALF = 8  # head width 16: 8 rotary frequencies
_LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
_LONGROPE = {"short_factor": [1.0 + i / 8 for i in range(HALF)], "long_factor": [2.0 + i for i in range(HALF)]}
_GEMMA = dict(head_dim=16, query_pre_attn_scalar=12, sliding_window=WINDOW)
_INTERLEAVED = ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]


def _config(case: str):
    import transformers as t

    if case == "llama":
        return t.LlamaConfig(**SHAPE)
    if case == "llama-llama3":
        rope = {**_LLAMA3, "rope_theta": 500000.0, "original_max_position_embeddings": 8}
        return t.LlamaConfig(**SHAPE, rope_parameters=rope)
    if case == "llama-linear":
        return t.LlamaConfig(**SHAPE, rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0})
    if case == "llama-dynamic":  # the steps below pass max_position_embeddings: the base stretches
        rope = {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}
        return t.LlamaConfig(**{**SHAPE, "max_position_embeddings": 10}, rope_parameters=rope)
    if case == "llama-yarn":
        rope = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 8}
        return t.LlamaConfig(**SHAPE, rope_parameters=rope)
    if case == "llama-longrope":  # long factors from position 10 on
        rope = {"rope_type": "longrope", **_LONGROPE, "rope_theta": 10000.0, "original_max_position_embeddings": 10}
        return t.LlamaConfig(**{**SHAPE, "max_position_embeddings": 40}, rope_parameters=rope)
    if case == "llama-biases":
        return t.LlamaConfig(**SHAPE, attention_bias=True, mlp_bias=True, tie_word_embeddings=True)
    if case == "mistral":
        return t.MistralConfig(**SHAPE, sliding_window=WINDOW, head_dim=24)
    if case in ("ministral", "mistral-layer-types"):
        return t.MinistralConfig(**SHAPE, sliding_window=WINDOW, layer_types=_INTERLEAVED, head_dim=16)
    if case == "qwen2":
        return t.Qwen2Config(**SHAPE, tie_word_embeddings=True)
    if case == "qwen2-sliding":
        return t.Qwen2Config(**SHAPE, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2)
    if case == "qwen3":
        return t.Qwen3Config(**SHAPE, head_dim=24)
    if case == "qwen3-biases":
        return t.Qwen3Config(**SHAPE, head_dim=16, attention_bias=True, tie_word_embeddings=True)
    if case == "gemma2":
        return t.Gemma2Config(**SHAPE, **_GEMMA, attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
    if case == "gemma3":
        types = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
        rope = {
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        }
        return t.Gemma3TextConfig(
            **SHAPE, **_GEMMA, layer_types=types, rope_parameters=rope, final_logit_softcapping=3.0
        )
    raise AssertionError(case)


CASES = [
    "llama",
    "llama-llama3",
    "llama-linear",
    "llama-dynamic",
    "llama-yarn",
    "llama-longrope",
    "llama-biases",
    "mistral",
    "ministral",
    "mistral-layer-types",
    "qwen2",
    "qwen2-sliding",
    "qwen3",
    "qwen3-biases",
    "gemma2",
    "gemma3",
]
WINDOWED = {"mistral", "ministral", "mistral-layer-types", "qwen2-sliding", "gemma2", "gemma3"}


def _save(model, folder, case: str) -> None:
    """`model` saved as a checkpoint; "mistral-layer-types" as Ministral 8B ships: a mistral
    config.json that lists `layer_types`, which transformers' AutoConfig reads as Ministral."""
    model.save_pretrained(folder)
    if case == "mistral-layer-types":
        config = json.loads((folder / "config.json").read_text())
        config.update(model_type="mistral", architectures=["MistralForCausalLM"])
        (folder / "config.json").write_text(json.dumps(config))


def _random_model(config, seed: int = 7):
    """transformers' model of `config` with random weights, norms and biases moved off their
    initial values (ones, zeros) so every one of them counts."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.3)
    return model


@pytest.fixture(scope="module", params=CASES)
def twins(request, tmp_path_factory):
    """(case, transformers' float32 model never run, the native models by dtype name)."""
    model = _random_model(_config(request.param))
    folder = tmp_path_factory.mktemp(request.param)
    _save(model, folder, request.param)
    ref = resolve_model(str(folder))
    natives = {d: load_model(ref, device="cpu", dtype=d, impl="native") for d in ("float32", "bfloat16", "float16")}
    assert {lm.impl for lm in natives.values()} == {"native"}
    return request.param, model, natives


def _fresh(pristine, dtype=torch.float32) -> TransformersRuntime:
    """transformers' model as loaded, for one sequence: its rotary module keeps state between passes
    (dynamic NTK), which must start as it would in a new process."""
    return TransformersRuntime(copy.deepcopy(pristine).to(dtype))


def _logits(runtime, ids, cache=None, **padding):
    """The logits of one pass as the engine computes them: the runtime's body, then its head."""
    hidden, cache = runtime.hidden(ids, cache, use_cache=cache is not None, **padding)
    return runtime.head().logits(hidden), cache


def _whole(runtime, ids):
    """transformers' logits of a whole sequence in one pass, without a cache."""
    return runtime.module(input_ids=ids, use_cache=False).logits.float()


def _alone(pristine, dtype, feeds: list[list[int]]) -> list[torch.Tensor]:
    """transformers' logits of one sequence fed pass by pass, with its cache."""
    runtime = _fresh(pristine, dtype)
    cache, out = runtime.new_cache(), []
    for feed in feeds:
        logits, cache = _logits(runtime, torch.tensor([feed]), cache)
        out.append(logits[0])
    return out


IDS = torch.tensor([[5, 17, 90, 42, 7, 7, 200, 11, 3, 64, 128, 250, 9, 31, 77, 2, 180]])


def _passes(runtime, pristine, dtype=torch.float32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(`runtime`'s, transformers') logits of every pass the engine makes: a prefill of 10 tokens,
    three cached single steps, a draft of 3 of which 2 are cropped and replaced by a 2-token feed,
    and batched passes of rows of different lengths with explicit positions."""
    out = []
    with torch.inference_mode():
        reference = _fresh(pristine, dtype)
        mine, theirs = runtime.new_cache(), reference.new_cache()
        out.append((_logits(runtime, IDS[:, :10], mine)[0], _logits(reference, IDS[:, :10], theirs)[0]))
        for t in range(10, 13):  # cached single steps
            step = IDS[:, t : t + 1]
            out.append((_logits(runtime, step, mine)[0], _logits(reference, step, theirs)[0]))
        draft, other = IDS[:, 13:16], IDS[:, 16:17].repeat(1, 2)
        out.append((_logits(runtime, draft, mine)[0], _logits(reference, draft, theirs)[0]))
        # two draft tokens turned down, then two others fed in their place; transformers cannot crop a
        # sliding-window cache, so there the kept sequence is run in one pass
        kept = torch.cat([IDS[:, :14], other], dim=1)
        pair = []
        for r, cache in ((runtime, mine), (reference, theirs)):
            if r.supports.crop:
                cache.crop(-2)
                pair.append(_logits(r, other, cache)[0])
            else:
                pair.append(_whole(_fresh(pristine, dtype), kept)[:, -2:])
        out.append(tuple(pair))
        out += _batched(runtime, pristine, dtype)
    return out


def _batched(runtime, pristine, dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two rows as batching lays them out: the shorter prompt padded on the left, then a step that
    feeds the first row two tokens and the second one (its second column masked: a hole inside the
    row), then a single step. Each row's logits against transformers' on that row alone."""
    long, short = IDS[0, :12].tolist(), IDS[0, 3:10].tolist()
    pad = len(long) - len(short)
    ids = torch.tensor([long, [0] * pad + short])
    mask = torch.tensor([[1] * len(long), [0] * pad + [1] * len(short)])
    positions = torch.tensor([list(range(len(long))), [0] * pad + list(range(len(short)))])
    got = [_logits(runtime, ids, runtime.new_cache(), attention_mask=mask, position_ids=positions)]
    mask = torch.cat([mask, torch.tensor([[1, 1], [1, 0]])], dim=1)
    positions = torch.tensor([[12, 13], [7, 8]])
    got.append(
        _logits(runtime, torch.tensor([[60, 61], [70, 0]]), got[-1][1], attention_mask=mask, position_ids=positions)
    )
    mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], dim=1)
    positions = torch.tensor([[14], [8]])
    got.append(_logits(runtime, torch.tensor([[80], [81]]), got[-1][1], attention_mask=mask, position_ids=positions))
    first = _alone(pristine, dtype, [long, [60, 61], [80]])
    second = _alone(pristine, dtype, [short, [70], [81]])
    return [
        (got[0][0][0], first[0]),
        (got[0][0][1, pad:], second[0]),
        (got[1][0][0], first[1]),
        (got[1][0][1, :1], second[1]),
        (got[2][0][0], first[2]),
        (got[2][0][1], second[2]),
    ]


def test_float32_logits_are_transformers_in_every_pass(twins):
    case, pristine, natives = twins
    for i, (got, want) in enumerate(_passes(natives["float32"].runtime, pristine)):
        assert got.shape == want.shape, (case, i)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), (case, i, (got - want).abs().max())


# bfloat16 (and float16): transformers' and the native forward's both round a float32 computation to
# 8 (11) bits of mantissa, at different places (the native one fuses projections, packs its
# products for oneDNN, attends with other kernels). So each is about as far from the float32 logits
# as the other: the native logits must stay within 3 times transformers' own distance from float32
# in that dtype, plus 1% of the logits' range for passes where that distance happens to be tiny.
# Measured: at most 2.5 times (bfloat16, Gemma 3), most cases 1.1-1.8. A formula error (a missing
# norm, a wrong rotation, an ignored window or cap) moved these logits by 0.5-4.4, their own size,
# where the bound is about 0.1-0.2.
_BF16 = (3.0, 0.01)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_logits_are_as_close_to_float32_as_transformers_own(twins, dtype):
    case, pristine, natives = twins
    half = getattr(torch, dtype)
    truths = [want for _, want in _passes(_fresh(pristine), pristine)]  # transformers' float32, pass by pass
    theirs = [want for _, want in _passes(_fresh(pristine, half), pristine, half)]
    mine = [got for got, _ in _passes(natives[dtype].runtime, pristine, half)]
    for i, (truth, their, my) in enumerate(zip(truths, theirs, mine)):
        their_error = (their.float() - truth).abs().max().item()
        bound = _BF16[0] * their_error + _BF16[1] * truth.abs().max().item()
        my_error = (my.float() - truth).abs().max().item()
        assert my_error <= bound, (case, i, my_error, their_error)


@pytest.mark.parametrize(
    "case, name",
    [
        ("mistral", "sliding_window"),
        ("mistral-layer-types", "layer_types"),
        ("qwen2-sliding", "sliding_window"),
        ("gemma2", "sliding_window"),
        ("gemma2", "attn_logit_softcapping"),
        ("gemma2", "final_logit_softcapping"),
        ("gemma3", "sliding_window"),
        ("gemma3", "final_logit_softcapping"),
    ],
)
def test_the_windows_and_soft_caps_of_the_cases_change_the_logits(case, name):
    """The cases' windows, layer types and caps are small enough to matter: without one (a window
    longer than the sequence, every layer sliding, no cap), transformers' own logits differ, so a
    native forward that ignored it could not pass the tests above."""
    config = _config(case)
    model = _random_model(config)
    plain = {"sliding_window": 4096, "layer_types": ["sliding_attention"] * len(_INTERLEAVED)}.get(name)
    plain = _random_model(type(config)(**{**config.to_dict(), name: plain}))
    plain.load_state_dict(model.state_dict())
    with torch.inference_mode():
        assert not torch.allclose(
            _whole(TransformersRuntime(plain), IDS), _whole(TransformersRuntime(model), IDS), atol=1e-3
        )


def _older_file(case: str) -> dict:
    """The case's config.json as transformers 4.x wrote it: `rope_theta` and `rope_scaling` beside
    the other keys instead of `rope_parameters`, Gemma 3's local base as `rope_local_base_freq` and
    its layer pattern as `sliding_window_pattern`, no `layer_types` (the config class fills them in)."""
    config = _config(case).to_dict()
    if case == "mistral-layer-types":
        config.update(model_type="mistral", architectures=["MistralForCausalLM"])
    elif case != "ministral":  # Ministral's layer types have no older spelling
        config.pop("layer_types", None)
    rope = config.pop("rope_parameters")
    if case == "gemma3":
        config["rope_theta"] = rope["full_attention"].pop("rope_theta")
        config["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
        config["rope_scaling"] = rope["full_attention"]
        config["sliding_window_pattern"] = 3  # sliding, sliding, global: the case's layer types
    else:
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = None if rope["rope_type"] == "default" else rope
    return config


@pytest.mark.parametrize("case", CASES)
def test_older_config_files_read_as_transformers_reads_them(case):
    from transformers import CONFIG_MAPPING

    older = _older_file(case)
    as_transformers_reads_it = CONFIG_MAPPING[older["model_type"]](**older).to_dict()
    expected = families.read(_config(case).to_dict())
    assert families.read(older) == expected
    assert families.read(as_transformers_reads_it) == expected


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"hidden_act": "gelu"}, "the activation gelu"),
        ({"rope_parameters": {"rope_type": "proportional", "rope_theta": 10000.0}}, "proportional rope scaling"),
        # the default rope ignores a partial factor (tests/test_family_configs_s63.py); a scaling cannot
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}}, "partial_rota"),
        ({"quantization_config": {"quant_method": "gptq"}}, "a quantization config"),
        ({"model_type": "phi3", "architectures": ["Phi3ForCausalLM"]}, "architecture is phi3"),
        ({"architectures": ["LlamaForSequenceClassification"]}, "LlamaForSequenceClassification"),
    ],
)
def test_what_the_native_forward_does_not_implement_is_named(change, reason):
    config = {**_config("llama").to_dict(), **change}
    assert reason in families.misfit(config)
    assert families.misfit(_config("llama").to_dict()) is None


def test_a_mistral_config_with_layer_types_is_read_as_transformers_reads_it(tmp_path):
    """transformers' AutoConfig reads a mistral config.json that lists `layer_types` as Ministral's,
    full and sliding layers interleaved (the reference the cases above are compared with); so does
    the native forward, where it once made every layer slide."""
    from transformers import AutoConfig

    _save(_random_model(_config("mistral-layer-types")), tmp_path, "mistral-layer-types")
    theirs = AutoConfig.from_pretrained(tmp_path)
    assert (theirs.model_type, theirs.layer_types) == ("ministral", _INTERLEAVED)
    arch = families.read(json.loads((tmp_path / "config.json").read_text()))
    assert arch.windows == (WINDOW, None, None, WINDOW)


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"layer_types": ["full_attention", "chunked_attention"] * 2}, "'chunked_attention' layers"),
        ({"layer_types": ["full_attention"] * 3}, "layer_types that are not a list of its 4 layers"),
        ({"sliding_window": None}, "sliding layers without a sliding_window"),
    ],
)
@pytest.mark.parametrize("model_type", ["mistral", "ministral", "qwen2", "gemma2"])
def test_layer_types_the_native_forward_cannot_honour_are_named(model_type, change, reason):
    """Such a config runs on transformers (which refuses it too), the record saying why."""
    config = {**_config("ministral").to_dict(), "model_type": model_type, "architectures": None}
    config |= {"use_sliding_window": True, "layer_types": _INTERLEAVED} | change
    assert reason in families.misfit(config)
    assert families.misfit({**config, "layer_types": ["attention"] * 4, "sliding_window": None}) is None


@pytest.mark.parametrize("differs", [True, False])
def test_a_tied_config_whose_checkpoint_ships_its_own_head_is_read_as_transformers_reads_it(tmp_path, differs):
    """`tie_word_embeddings: true` beside a shipped `lm_head.weight`: transformers keeps that head
    where it differs from the embeddings (and ties them where it does not); the native logits are
    transformers' either way, where the native forward once always reused the embeddings."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    model = _random_model(LlamaConfig(**SHAPE, tie_word_embeddings=False))
    if not differs:
        with torch.no_grad():
            model.lm_head.weight.copy_(model.model.embed_tokens.weight)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    theirs = TransformersRuntime(AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval())
    native = load_model(resolve_model(str(tmp_path)), device="cpu", dtype="float32", impl="native")
    assert native.impl == "native"
    with torch.inference_mode():
        got, want = _logits(native.runtime, IDS)[0], _logits(theirs, IDS)[0]
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), (got - want).abs().max()


def _records(lm, tokenizer, prompts, *, batch: bool):
    from sgcli.backends import check_supports
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}}}
    schema["required"] = ["a", "n"]
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "t", json_options=JsonOptions(whitespace="compact"))
    compiled = check_supports("llguidance", spec).compile(spec, tokenizer.vocab.padded(lm.logits_width))
    session = Session(lm, tokenizer, compiled, SamplingParams(0.0, seed=3), 24, (), PromptOptions(raw=True))
    requests = [Request(f"r{i}", p) for i, p in enumerate(prompts)]
    if batch:
        session.jump_forward = False  # the batch's records are the plain loop's
        return list(session.batch(requests, batch_size=3))
    return [list(session.stream(r))[-1].record for r in requests]


PROMPTS = ["Capital of France?", "x", "Tell me about the number seven, please.", "Hi", "One more."]


@pytest.mark.parametrize(
    "case", ["llama-llama3", "mistral", "mistral-layer-types", "qwen2-sliding", "qwen3", "gemma2", "gemma3"]
)
def test_each_family_writes_transformers_records_alone_and_batched(case, tmp_path, smol_tokenizer):
    """Greedy constrained records of transformers' single-stream loop, and the same from the native
    forward alone (with jump-forward drafts, cropped where turned down) and batched (rows spliced,
    padded, refilled): the engine's guarantee, family by family. Prompts pass the windows."""
    from sgcli.engine.loader import LoadedModel

    config = _config(case)
    config.vocab_size, config.initializer_range = len(smol_tokenizer.vocab), 0.3
    model = _random_model(config)
    _save(model, tmp_path, case)
    native = load_model(resolve_model(str(tmp_path)), device="cpu", impl="native")
    reference = LoadedModel(TransformersRuntime(model), native.ref, "cpu", "float32", native.logits_width, 0.0)
    expected = [r["output"] for r in _records(reference, smol_tokenizer, PROMPTS, batch=False)]
    assert [r["output"] for r in _records(native, smol_tokenizer, PROMPTS, batch=False)] == expected
    batched = _records(native, smol_tokenizer, PROMPTS, batch=True)
    assert [r["output"] for r in batched] == expected
    assert {r["model_impl"] for r in batched} == {"native"}
    assert len(set(expected)) > 1  # rows really differ


def test_a_hub_id_runs_natively_once_its_snapshot_is_complete_in_the_hub_cache(tmp_path, monkeypatch):
    """A hub snapshot is a model folder: auto runs the native forward there once config.json and
    every weight file are in the cache; before that it runs transformers and the record says why."""
    from huggingface_hub import constants

    from sgcli.engine.impl_choice import choose_impl
    from sgcli.models.refs import ModelRef

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--org--tiny-qwen3"
    snapshot = repo / "snapshots" / ("0" * 40)
    _random_model(_config("qwen3")).save_pretrained(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    ref = ModelRef("hub", "org/tiny-qwen3", "org/tiny-qwen3")
    assert choose_impl(ref, "auto", {}, "cpu") == (True, None)
    lm = load_model(ref, device="cpu")
    assert (lm.impl, lm.impl_reason) == ("native", None)
    (snapshot / "model.safetensors").unlink()  # half downloaded
    native, reason = choose_impl(ref, "auto", {}, "cpu")
    assert native is False and "not all in the local hub cache" in reason


def test_auto_says_why_it_ran_transformers(tmp_path):
    model = _random_model(_config("llama"))
    model.config.hidden_act = "gelu"  # a Llama the native forward does not compute
    model.save_pretrained(tmp_path)
    lm = load_model(resolve_model(str(tmp_path)), device="cpu")
    assert lm.impl == "transformers" and "the activation gelu" in lm.impl_reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemma_norms_are_transformers_values_bit_for_bit(dtype):
    """Gemma's norm (1 + weight, scaled in float32, then cast) and Qwen3's per-head query/key norms
    stacked into one weight are rewrites of transformers' arithmetic: equal bit for bit."""
    from transformers.models.gemma2.modeling_gemma2 import Gemma2RMSNorm
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    from sgcli.engine.llama import RMSNorm

    torch.manual_seed(5)
    x = (torch.randn(3, 5, 64) * torch.rand(64) * 10).to(dtype)
    ours, theirs = RMSNorm(64, 1e-6, offset=True), Gemma2RMSNorm(64, eps=1e-6)
    ours.weight = torch.nn.Parameter(torch.randn(64).to(dtype), requires_grad=False)
    theirs.weight = torch.nn.Parameter(ours.weight.clone(), requires_grad=False)
    assert torch.equal(ours(x), theirs(x))

    heads = x.view(3, 5, 4, 16)  # 3 query heads and 1 key head of width 16, side by side
    q_norm, k_norm = Qwen3RMSNorm(16, eps=1e-6), Qwen3RMSNorm(16, eps=1e-6)
    q_norm.weight = torch.nn.Parameter(torch.randn(16).to(dtype), requires_grad=False)
    k_norm.weight = torch.nn.Parameter(torch.randn(16).to(dtype), requires_grad=False)
    stacked = RMSNorm(16, 1e-6, heads=4)
    stacked.weight = torch.nn.Parameter(torch.cat([q_norm.weight.expand(3, -1), k_norm.weight.expand(1, -1)]))
    expected = torch.cat([q_norm(heads[:, :, :3]), k_norm(heads[:, :, 3:])], dim=2)
    assert torch.equal(stacked(heads), expected)
