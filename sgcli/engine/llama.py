"""A native forward pass for Llama-architecture models (SmolLM2, Llama 2/3-style checkpoints).

Why: importing transformers' model code costs about 3 s before the first token (it pulls in
torch's compiler and distributed packages), and its per-layer Python costs about a third of a
single-token pass of a small model on a CPU. This module runs the same arithmetic in a few torch
calls per layer: query, key and value projected by one matrix product, gate and up by another,
attention by `cpu_kernels.attend`. The engine drives it through `runtime.NativeRuntime`; its
`model(...)` call answers as a transformers model's does, for the tests that hold the two side by side.

`misfit(config)` says why a checkpoint is not one this module computes exactly (rope scaling,
biases, other activations, another architecture); the loader then uses transformers. The tests
check this forward against transformers' `LlamaForCausalLM` on the same weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from sgcli.engine.cpu_kernels import Linear, attend, meta_parameter, pack
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


def _rope_theta(config: dict) -> float:
    rope = config.get("rope_parameters") or {}
    return float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = meta_parameter(width)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalised in float32, scaled in the input's dtype, as transformers' LlamaRMSNorm does;
        # one fused call instead of five (the same values, bit for bit)
        return self.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)


class Layer(nn.Module):
    """One decoder layer, with the attention's and the MLP's input projections fused."""

    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.split = (q + kv, kv)  # queries and keys, then values
        self.qkv = Linear(c.hidden_size, q + 2 * kv)
        self.o = Linear(q, c.hidden_size)
        self.gate_up = Linear(c.hidden_size, 2 * c.intermediate_size)
        self.down = Linear(c.intermediate_size, c.hidden_size)
        self.attn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache: KVCache | None, index: int):
        rows, length, _ = x.shape
        q_and_k, v = self.qkv(self.attn_norm(x)).split(self.split, dim=-1)
        heads = self.heads + self.kv_heads  # queries and keys side by side: rotated in one go
        q_and_k = _rotate(q_and_k.view(rows, length, heads, self.head_dim).transpose(1, 2), cos, sin)
        q, k = q_and_k[:, : self.heads], q_and_k[:, self.heads :]
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


def _rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding: x * cos + (-x2, x1) * sin, where x1 and x2 are x's halves. `signed_sin`
    has its first half negated, so the turn is one roll (negating a factor is exact: the same
    values as transformers' rotate_half, in 4 calls instead of 7 on a CPU where each costs ~10 us)."""
    return x * cos + torch.roll(x, x.shape[-1] // 2, -1) * signed_sin


def rotary_tables(position_ids: torch.Tensor, inv_freq: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, signed sin) [rows, 1, length, head width] of each position's angles, as transformers
    computes them, the sine's first half negated for `_rotate`."""
    freqs = position_ids[..., None].float() * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)[:, None]
    sin = angles.sin()
    half = sin.shape[-1] // 2
    return angles.cos().to(dtype), torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).to(dtype)


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
        cos, sin = rotary_tables(position_ids, self.inv_freq, x.dtype)
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
                "final_logit_softcapping": config.get("final_logit_softcapping"),
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
        """Pack every matrix product but the embedding's lookup for the CPU (`cpu_kernels.pack`);
        returns the kernel's name, or None where products stay torch's own."""
        linears = [m for m in self.modules() if isinstance(m, Linear) and m is not self.model.embed]
        return pack(linears, self.lm_head)

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
