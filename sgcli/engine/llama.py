"""A native forward pass for Llama-architecture models (SmolLM2, Llama 2/3-style checkpoints).

Why: importing transformers' model code costs about 3 s before the first token (it pulls in
torch's compiler and distributed packages), and its per-layer Python costs about a third of a
single-token pass of a small model on a CPU. This module runs the same arithmetic in a few torch
calls per layer: query, key and value projected by one matrix product, gate and up by another,
attention by `scaled_dot_product_attention`. It answers the calls the engine makes of a
transformers model (`model(...)`, `base_model(...)`, `get_output_embeddings()`), so the decode
loop, batching and the output head drive either without asking which.

`misfit(config)` says why a checkpoint is not one this module computes exactly (rope scaling,
biases, other activations, another architecture); the loader then uses transformers. The tests
check this forward against transformers' `LlamaForCausalLM` on the same weights.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from sgcli.engine.kv import KVCache


def misfit(config: dict) -> str | None:
    """Why this config is not a model the native forward computes exactly (None when it is)."""
    architectures = config.get("architectures") or ["LlamaForCausalLM"]
    if config.get("model_type") != "llama" or architectures != ["LlamaForCausalLM"]:
        return f"its architecture is {config.get('model_type')} ({', '.join(map(str, architectures))}), not llama"
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "unknown"
    checks = {
        f"activation {config.get('hidden_act')}": config.get("hidden_act", "silu") == "silu",
        "attention biases": not config.get("attention_bias"),
        "MLP biases": not config.get("mlp_bias"),
        f"{rope_type} rope scaling": rope_type == "default",
        "a quantization config": not config.get("quantization_config"),
        "a sliding window": not config.get("sliding_window"),
    }
    found = [name for name, ok in checks.items() if not ok]
    return f"it uses {' and '.join(found)}" if found else None


BF16_KERNEL = "onednn-bf16"  # packed bfloat16 products; prefills widened to float32
AMX_KERNEL = "onednn-bf16-amx"  # packed bfloat16 products; prefills through torch's bfloat16 kernel on AMX tiles
# packed bfloat16 products; prefills through torch's bfloat16 kernel, measured faster than float32 on this CPU
PREFILL_BF16_KERNEL = "onednn-bf16-prefill"
# From this many rows (tokens in one pass) the packed kernel is no longer the fastest for
# SmolLM2's matrices (one thread), and widening the weight to float32 for that one call wins:
# measured on an Intel Xeon with AVX-512 BF16 only, the crossover lay between 64 and 128 rows,
# and at 1104 rows float32 took 37 ms where oneDNN took 57.
WIDE_ROWS = 128
# Where torch's bfloat16 products are the faster wide kernel (always with AMX; on other CPUs where
# `bf16_beats_float32` measures so), they take over from the packed kernel at this many rows. With
# AMX a 576 x 3072 product at 128 rows took 2.95 ms in float32, 0.54 packed, 0.69 torch's
# bfloat16, and torch's overtook the packed kernel from about 512 rows (1024 rows: 3.04 against
# 3.25 ms); a 16 x 70 prefill took 504 CPU ms with this bound, 2116 widened to float32. On an AMD
# EPYC (Zen 5, AVX-512 BF16, no AMX) both bfloat16 kernels ran ~400 GFLOP/s from 128 rows on,
# float32 88, and that prefill took 869 against 2831 ms (docs/performance.md, "AMX", "Zen 5").
WIDE_ROWS_BF16 = 512


def amx_tiles() -> bool:
    """Whether this CPU has AMX tiles, where torch's bfloat16 products of wide passes run on them."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


@functools.cache
def bf16_beats_float32(rows: int = 256, inputs: int = 1024, outputs: int = 2048, repeats: int = 3) -> bool:
    """Whether torch's bfloat16 product of a wide pass (`rows` tokens, a weight of `outputs` x
    `inputs`) takes less CPU time on this CPU than widening both to float32, as prefills do
    otherwise (best of `repeats`; measured once a process, on a fixed shape: it is the CPU's
    answer, not a model's).

    Why measured: CPUs with AVX-512 BF16 and no AMX differ by 7x between them. On an Intel Xeon
    float32 won (37 against 57 ms at 1104 rows); on an AMD EPYC (Zen 5) bfloat16 was 4.6x faster.
    No CPU flag told them apart, and the margins are wide enough not to flip with load."""
    weight = torch.linspace(-1, 1, outputs * inputs).view(outputs, inputs).bfloat16()
    x = torch.linspace(1, -1, rows * inputs).view(rows, inputs).bfloat16()

    def best(product) -> float:
        product()
        times = []
        for _ in range(repeats):
            t = time.process_time()
            product()
            times.append(time.process_time() - t)
        return min(times)

    with torch.inference_mode():
        return best(lambda: F.linear(x, weight)) < best(lambda: F.linear(x.float(), weight.float()))


def bf16_kernel_problem() -> str | None:
    """Why oneDNN's prepacked bfloat16 matrix products cannot run here (None when they can)."""
    ops = getattr(torch.ops, "mkldnn", None)
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    if ops is None or not all(hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build lacks oneDNN's prepacked linear"
    units = [
        getattr(torch.cpu, check, lambda: False)() for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    ]
    if not any(units) or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "this CPU has no bfloat16 dot-product instructions (AVX-512 BF16 or AMX)"
    return None


def _available_memory() -> float:
    """Bytes of memory the system can still give (MemAvailable); infinite where it cannot say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return float("inf")


def _rope_theta(config: dict) -> float:
    rope = config.get("rope_parameters") or {}
    return float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0)


def _meta(*shape: int) -> nn.Parameter:
    """A weight with no storage yet (`load` assigns it). Built directly on the meta device: nn's
    layers would initialise it, and initialising on meta imports torch's compiler (1.6 s)."""
    return nn.Parameter(torch.empty(shape, device="meta"), requires_grad=False)


class Linear(nn.Module):
    """`nn.Linear` without a bias, built uninitialised. `packed`: its weight in oneDNN's blocked
    layout (`pack_for_cpu`), used for bfloat16 inputs on the CPU."""

    bias = None
    packed: torch.Tensor | None = None
    wide_bf16 = False  # with `packed`: wide passes take torch's bfloat16 products, not float32 ones

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.weight = _meta(outputs, inputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and x.dtype == torch.bfloat16 and x.device.type == "cpu":
            if x.numel() < (WIDE_ROWS_BF16 if self.wide_bf16 else WIDE_ROWS) * x.shape[-1]:
                return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [None], "")
            if not self.wide_bf16:  # a prefill where float32 is faster: weight widened per call
                return F.linear(x.float(), self.weight.float()).to(torch.bfloat16)
        return F.linear(x, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = _meta(width)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Layer(nn.Module):
    """One decoder layer, with the attention's and the MLP's input projections fused."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.split = (q, kv, kv)
        self.qkv = Linear(c.hidden_size, q + 2 * kv)
        self.o = Linear(q, c.hidden_size)
        self.gate_up = Linear(c.hidden_size, 2 * c.intermediate_size)
        self.down = Linear(c.intermediate_size, c.hidden_size)
        self.attn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache: KVCache | None, index: int):
        rows, length, _ = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(self.split, dim=-1)
        q = _rotate(q.view(rows, length, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = _rotate(k.view(rows, length, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = v.view(rows, length, self.kv_heads, self.head_dim).transpose(1, 2)
        columns = k.shape[-2]
        if cache is not None:
            cache.update(k, v, index)
            k, v = cache.whole(index)
            columns = cache.get_seq_length(index)
        attended = attend(q, k, v, mask, columns)
        x = x + self.o(attended.transpose(1, 2).reshape(rows, length, -1))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


# Up to this many new positions a row, bfloat16 attention on a CPU runs as two matrix products
# and a softmax instead of `scaled_dot_product_attention`, whose CPU kernel is pathological there
# with several rows: 16 rows x 1 position over 101 columns took 1323 us against 120 (4 positions:
# 679 against 192; 16: 1524 against 565), while at 64 positions it wins (6704 against 8248).
# float32 keeps the fused kernel: the two products won only at some shapes there (16 x 1: 151
# against 179 us; 1 x 1: 29 against 15), and float32 outputs stay as they were
# (docs/performance.md, "Zen 5").
SHORT_QUERIES = 16


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, columns: int | None = None
) -> torch.Tensor:
    """Attention of q [rows, heads, positions, head width] over k and v [rows, kv heads, columns,
    head width], of which the first `columns` are the cache's (all by default; the rest are spare
    buffer columns, never attended to), under the additive `mask` over those (None: nothing
    masked). Heads share kv heads in groups as in transformers (head h reads kv head
    h // (heads / kv heads))."""
    rows, heads, length, width = q.shape
    kv_heads, total = k.shape[1], k.shape[-2]
    columns = total if columns is None else columns
    if q.dtype != torch.bfloat16 or q.device.type != "cpu" or length > SHORT_QUERIES:
        k, v = k[..., :columns, :], v[..., :columns, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads)
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(rows, kv_heads, group * length, width), k.transpose(-1, -2))
    scores = scores.float().view(rows, kv_heads, group, length, total) * width**-0.5
    if mask is not None:
        scores[..., :columns] += mask[:, :, None].float()
    if total > columns:
        scores[..., columns:] = torch.finfo(torch.float32).min
    weights = torch.softmax(scores, dim=-1).to(q.dtype).view(rows, kv_heads, group * length, total)
    return torch.matmul(weights, v).view(rows, heads, length, width)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


@dataclass
class BodyOutput:
    last_hidden_state: torch.Tensor
    past_key_values: KVCache | None


@dataclass
class LMOutput:
    logits: torch.Tensor
    past_key_values: KVCache | None


class Body(nn.Module):
    """Embeddings, the decoder layers and the final norm: hidden states, no logits."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.config = c
        self.embed = Linear(c.hidden_size, c.vocab_size)  # its weight: one row per token
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: KVCache | None = None,
        use_cache: bool = True,
    ) -> BodyOutput:
        rows, length = input_ids.shape
        cache = past_key_values if past_key_values is not None else (self.new_cache() if use_cache else None)
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + length, device=input_ids.device)[None].expand(rows, -1)
        x = F.embedding(input_ids, self.embed.weight)
        freqs = position_ids[..., None].float() * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)[:, None]  # [rows, 1, length, head_dim]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        mask = _attention_mask(attention_mask, rows, length, past, x.dtype, x.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, mask, cache, i)
        return BodyOutput(self.norm(x), cache if use_cache else None)

    def new_cache(self) -> KVCache:
        return KVCache(len(self.layers))


def _attention_mask(padding, rows: int, length: int, past: int, dtype, device) -> torch.Tensor | None:
    """The additive mask [rows, 1, length, columns]: causal by cache column, padding columns masked.
    None where nothing is masked (one new position and no padding). A query row with nothing to
    attend to (a padding position) gets a uniform row, not NaN: its output is never used, but NaN
    keys or values would spread through the products."""
    columns = past + length
    if padding is None and length == 1:
        return None
    allowed = torch.arange(columns, device=device)[None] <= torch.arange(past, columns, device=device)[:, None]
    allowed = allowed[None, None]
    if padding is not None:
        allowed = allowed & padding[:, None, None, -columns:].bool()
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


class NativeLlama(nn.Module):
    """A Llama causal LM with the call surface the engine uses of a transformers model."""

    def __init__(self, config: dict):
        super().__init__()
        heads = config["num_attention_heads"]
        given = {k: v for k, v in config.items() if isinstance(k, str) and k.isidentifier()}
        self.config = SimpleNamespace(  # the checkpoint's config (context length, token ids), defaults filled in
            **{
                **given,
                "num_key_value_heads": config.get("num_key_value_heads") or heads,
                "head_dim": config.get("head_dim") or config["hidden_size"] // heads,
                "rms_norm_eps": config.get("rms_norm_eps", 1e-6),
                "rope_theta": _rope_theta(config),
                "tie_word_embeddings": config.get("tie_word_embeddings", False),
            }
        )
        self.model = Body(self.config)
        self.lm_head = Linear(self.config.hidden_size, self.config.vocab_size)
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed.weight

    @property
    def base_model(self) -> Body:
        return self.model

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def get_output_embeddings(self) -> Linear:
        return self.lm_head

    def pack_for_cpu(self) -> str | None:
        """Give every matrix product oneDNN's prepacked bfloat16 kernel; returns its name, or None
        (products stay `F.linear`) where it does not apply: another dtype or device, or a torch or
        CPU without oneDNN's bfloat16 support (`bf16_kernel_problem`).

        Why: torch's `F.linear` in bfloat16 on a CPU does not reach the bf16 dot-product units
        (AVX-512 BF16, AMX) for these shapes: measured on an Intel Xeon with avx512_bf16, a
        single-token pass took 78 ms in bfloat16 and 267 ms for a 4-token draft, against 49 and
        55 ms with packed weights and 73 and 112 ms in float32 (docs/performance.md). Prefills take
        torch's bfloat16 products from WIDE_ROWS_BF16 rows where those are faster than float32
        (always with AMX; measured elsewhere: `bf16_beats_float32`), float32 ones from WIDE_ROWS
        rows where they are not. The packed copies sit beside the weights (the model's bfloat16
        matrices, twice), which the output head and `state_dict` still read."""
        linears = [m for m in self.modules() if isinstance(m, Linear) and m is not self.model.embed]  # a lookup
        weight = self.lm_head.weight
        if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or bf16_kernel_problem() is not None:
            return None
        size = sum(linear.weight.numel() * linear.weight.element_size() for linear in linears)
        if size > _available_memory() / 2:  # the copies would crowd out the KV cache: torch's kernel instead
            return None
        amx = amx_tiles()
        wide_bf16 = amx or bf16_beats_float32()
        for linear in linears:
            linear.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), 1)
            linear.wide_bf16 = wide_bf16
        probe = torch.linspace(-1, 1, weight.shape[1], dtype=torch.bfloat16)[None]
        with torch.inference_mode():
            got, expected = self.lm_head(probe).float(), F.linear(probe, weight).float()
        if not torch.allclose(got, expected, rtol=2e-2, atol=2e-2):  # a kernel that computes otherwise: not used
            for linear in linears:
                linear.packed = None
            return None
        return AMX_KERNEL if amx else PREFILL_BF16_KERNEL if wide_bf16 else BF16_KERNEL

    def new_cache(self) -> KVCache:
        return self.model.new_cache()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: KVCache | None = None,
        use_cache: bool = True,
        logits_to_keep: int = 0,
    ) -> LMOutput:
        out = self.model(input_ids, attention_mask, position_ids, past_key_values, use_cache)
        hidden = out.last_hidden_state[:, -logits_to_keep:] if logits_to_keep else out.last_hidden_state
        return LMOutput(self.lm_head(hidden), out.past_key_values)


# transformers' parameter names -> this module's, per layer; q/k/v and gate/up are concatenated
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "mlp_norm.weight",
    "self_attn.o_proj.weight": "o.weight",
    "mlp.down_proj.weight": "down.weight",
}
_FUSED = {
    "qkv.weight": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "gate_up.weight": ("mlp.gate_proj", "mlp.up_proj"),
}


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a Hugging Face folder (one file, or the shards its index names)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        return [folder / name for name in names]
    single = folder / "model.safetensors"
    return [single] if single.is_file() else []


def load(folder: Path, config: dict, dtype: torch.dtype) -> NativeLlama:
    """A `NativeLlama` built without storage and given the weights in `folder`'s safetensors.
    Raises ValueError naming the first weight that is missing or has the wrong shape."""
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for file in weight_files(folder):
        state.update(load_file(str(file)))
    model = NativeLlama(config)
    n = model.config.num_hidden_layers
    embed = state.pop("model.embed_tokens.weight", None)
    if embed is None and model.config.tie_word_embeddings:
        embed = state.pop("lm_head.weight", None)  # a tied file may hold the twin under the other name
    ours: dict[str, torch.Tensor] = {
        "model.embed.weight": embed if embed is not None else _take(state, "model.embed_tokens.weight")
    }
    ours["model.norm.weight"] = _take(state, "model.norm.weight")
    for i in range(n):
        theirs, mine = f"model.layers.{i}.", f"model.layers.{i}."
        for name, target in _LAYER.items():
            ours[mine + target] = _take(state, theirs + name)
        for target, parts in _FUSED.items():
            ours[mine + target] = torch.cat([_take(state, f"{theirs}{p}.weight") for p in parts])
    if not model.config.tie_word_embeddings:
        ours["lm_head.weight"] = _take(state, "lm_head.weight")
    expected = model.state_dict()
    for name, tensor in ours.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}")
    model.load_state_dict({k: v.to(dtype) for k, v in ours.items()}, strict=False, assign=True)
    if model.config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed.weight
    left = [name for name, p in model.named_parameters() if p.device.type == "meta"]
    if left:
        raise ValueError(f"weight {left[0]} is missing")
    return model.eval()


def _take(state: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    if name not in state:
        raise ValueError(f"weight {name} is missing")
    return state.pop(name)
