"""A native forward pass for the decoder families people run: Llama (every rope scaling
transformers ships but Gemma 4's), Mistral, Qwen2/2.5, Qwen3, Gemma 2 and Gemma 3.

Why: importing transformers' model code costs about 3 s before the first token (it pulls in
torch's compiler and distributed packages), and its per-layer Python costs about a third of a
single-token pass of a small model on a CPU. This module runs the same arithmetic in a few torch
calls per layer: query, key and value projected by one matrix product, gate and up by another,
attention by `cpu_attention.attend`. The families differ by switches read from their config.json
(`sgcli.engine.families.Arch`): biases, query/key norms, sliding-window layers (masked by
position, so padded and spliced batch rows see the windows a lone sequence does), Gemma's
norms, scaled embeddings and soft-capping, the rotary frequencies (`sgcli.engine.rope`). The
engine drives it through `runtime.NativeRuntime`; its `model(...)` call answers as a transformers
model's does, for the tests that hold the two side by side.

`misfit(config)` says why a checkpoint is not one this module computes exactly (another
architecture, an activation, a rope kind it does not implement); the loader then uses
transformers. The tests check this forward against transformers' own classes on the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from sgcli.engine import families
from sgcli.engine.checkpoint import weight_files
from sgcli.engine.cpu_attention import attend
from sgcli.engine.cpu_kernels import Linear, meta_parameter, pack
from sgcli.engine.families import Arch
from sgcli.engine.kv import KVCache
from sgcli.engine.ragged import PassInput, Ragged
from sgcli.engine.ragged import plan as ragged_plan


def misfit(config: dict) -> str | None:
    """Why this config is not a model the native forward computes exactly (None when it is)."""
    return families.misfit(config)


class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dimension, normalised in float32 as transformers does.
    Llama's scales in the input's dtype (weight * normed); Gemma's (`offset`) scales by 1 + weight
    in float32, then casts. `heads`: a weight per head ([heads, width]), for the query and key
    heads normalised side by side (Qwen3, Gemma 3: one weight for the queries, one for the keys)."""

    def __init__(self, width: int, eps: float, offset: bool = False, heads: int | None = None):
        super().__init__()
        self.weight = meta_parameter(*((heads, width) if heads else (width,)))
        self.eps, self.offset = eps, offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one fused call for the normalisation instead of five (the same values, bit for bit)
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        if self.offset:
            return (normed * (1.0 + self.weight.float())).to(x.dtype)
        return self.weight * normed.to(x.dtype)


class Layer(nn.Module):
    """One decoder layer, with the attention's and the MLP's input projections fused."""

    def __init__(self, a: Arch, index: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = a.heads, a.kv_heads, a.head_dim
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.split = (q + kv, kv)  # queries and keys, then values
        self.qkv = Linear(a.hidden_size, q + 2 * kv, bias=a.qkv_bias)
        self.o = Linear(q, a.hidden_size, bias=a.o_bias)
        self.gate_up = Linear(a.hidden_size, 2 * a.intermediate_size, bias=a.mlp_bias)
        self.down = Linear(a.intermediate_size, a.hidden_size, bias=a.mlp_bias)
        self.attn_norm = RMSNorm(a.hidden_size, a.eps, a.gemma)
        self.mlp_norm = RMSNorm(a.hidden_size, a.eps, a.gemma)
        # Gemma normalises each block's output too, before it joins the residual stream
        self.attn_out_norm = RMSNorm(a.hidden_size, a.eps, True) if a.gemma else None
        self.mlp_out_norm = RMSNorm(a.hidden_size, a.eps, True) if a.gemma else None
        self.qk_norm = RMSNorm(a.head_dim, a.eps, a.gemma, self.heads + self.kv_heads) if a.qk_norm else None
        self.gelu = a.activation == "gelu_pytorch_tanh"
        self.scale, self.softcap = a.attn_scale, a.attn_softcap
        self.window, self.rope = a.windows[index], a.layer_rope[index]

    def forward(self, x: torch.Tensor, parts: list[Part], index: int) -> torch.Tensor:
        """`x`: the real positions of every part of the pass, one after another [tokens, width].
        Position-wise work runs on all of them at once; attention runs per part, over its cache."""
        q_and_k_and_v = self.qkv(self.attn_norm(x))
        attended = [self._attend(q_and_k_and_v[p.start : p.end], p, index) for p in parts]
        out = self.o(attended[0] if len(attended) == 1 else torch.cat(attended))
        x = x + (out if self.attn_out_norm is None else self.attn_out_norm(out))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        out = self.down((F.gelu(gate, approximate="tanh") if self.gelu else F.silu(gate)) * up)
        return x + (out if self.mlp_out_norm is None else self.mlp_out_norm(out))

    def _attend(self, projected: torch.Tensor, part: Part, index: int) -> torch.Tensor:
        """One part's attention: its projected queries, keys and values [its tokens, ...] laid out
        as its [rows, length] block (zeros at padding), rotated, cached, attended; [its tokens, q]."""
        rows, length, ragged = part.rows, part.length, part.ragged
        q_and_k, v = projected.split(self.split, dim=-1)
        if ragged is not None:  # attention reads the padded block
            q_and_k, v = ragged.unpack(q_and_k), ragged.unpack(v)
        heads = self.heads + self.kv_heads  # queries and keys side by side: normalised and rotated in one go
        q_and_k = q_and_k.reshape(rows, length, heads, self.head_dim)
        if self.qk_norm is not None:
            q_and_k = self.qk_norm(q_and_k)
        cos, sin = part.tables[self.rope]
        q_and_k = _rotate(q_and_k.transpose(1, 2), cos, sin)
        q, k = q_and_k[:, : self.heads], q_and_k[:, self.heads :]
        v = v.reshape(rows, length, self.kv_heads, self.head_dim).transpose(1, 2)
        columns = k.shape[-2]
        if part.cache is not None:
            part.cache.update(k, v, index)
            k, v = part.cache.whole(index)
            columns = part.cache.get_seq_length(index)
        mask = part.masks[self.window]
        if ragged is None:
            attended = attend(q, k, v, mask, columns, self.scale, self.softcap)
        else:  # per run of rows, each as wide as its widest row's feed
            attended = q.new_zeros(q.shape)
            for first, end, width in ragged.segments:
                cut = None if mask is None else mask[first:end, :, :width]
                attended[first:end, :, :width] = attend(
                    q[first:end, :, :width], k[first:end], v[first:end], cut, columns, self.scale, self.softcap
                )
        attended = attended.transpose(1, 2).reshape(rows, length, -1)
        return attended.reshape(rows * length, -1) if ragged is None else ragged.pack(attended)


@dataclass
class Part:
    """One part of a pass: rows that share a KV cache, [rows, length] fed positions (`ragged`: where
    the real ones are, None: all are), their slice [start, end) of the pass's packed positions,
    rotary tables per rope kind and attention masks per window."""

    rows: int
    length: int
    ragged: Ragged | None
    start: int
    end: int
    tables: list
    masks: dict
    cache: KVCache | None


def _rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding: x * cos + (-x2, x1) * sin, where x1 and x2 are x's halves. `signed_sin`
    has its first half negated, so the turn is one roll (negating a factor is exact: the same
    values as transformers' rotate_half, in 4 calls instead of 7 on a CPU where each costs ~10 us)."""
    return x * cos + torch.roll(x, x.shape[-1] // 2, -1) * signed_sin


def rotary_tables(
    position_ids: torch.Tensor, inv_freq: torch.Tensor, dtype, scaling: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, signed sin) [rows, 1, length, head width] of each position's angles, as transformers
    computes them (times the rope's attention `scaling`), the sine's first half negated for `_rotate`.
    `inv_freq`: [head width / 2], or one such row per row of `position_ids`."""
    freqs = position_ids[..., None].float() * (inv_freq if inv_freq.dim() == 1 else inv_freq[:, None])
    angles = torch.cat((freqs, freqs), dim=-1)[:, None]
    cos, sin = angles.cos(), angles.sin()
    if scaling != 1.0:
        cos, sin = cos * scaling, sin * scaling
    half = sin.shape[-1] // 2
    return cos.to(dtype), torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).to(dtype)


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

    def __init__(self, a: Arch):
        super().__init__()
        self.arch = a
        self.embed = Linear(a.hidden_size, a.vocab_size)  # its weight: one row per token
        self.layers = nn.ModuleList(Layer(a, i) for i in range(a.layers))
        self.norm = RMSNorm(a.hidden_size, a.eps, a.gemma)
        frequencies = [rope.frequencies() for rope in a.ropes]  # per-pass kinds: recomputed when they change
        self.register_buffer("inv_freq", torch.stack([f for f, _ in frequencies]), persistent=False)
        self.scalings = [scaling for _, scaling in frequencies]
        # Gemma scales the embeddings by sqrt(width), rounded to the weights' dtype as transformers does
        scale = torch.tensor(a.hidden_size**0.5) if a.gemma else None
        self.register_buffer("embed_scale", scale, persistent=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: KVCache | None = None,
        use_cache: bool = True,
    ) -> BodyOutput:
        cache = past_key_values if past_key_values is not None else (self.new_cache() if use_cache else None)
        [(hidden, cache)] = self.passes([PassInput(input_ids, attention_mask, position_ids, cache)])
        return BodyOutput(hidden, cache if use_cache else None)

    def passes(self, inputs: list[PassInput]) -> list[tuple[torch.Tensor, KVCache | None]]:
        """One pass over several parts, each with its own rows and cache (a batch's decode step beside
        the prefill of the rows joining it): the layers' position-wise work (norms, projections,
        MLP) runs once on every part's real positions, attention per part. Per part: the last
        hidden states [rows, length, width] (zeros at padding) and its cache."""
        parts, ids = [], []
        start = 0
        for given in inputs:
            rows, length = given.input_ids.shape
            past = given.cache.get_seq_length() if given.cache is not None else 0
            positions = given.position_ids
            if positions is None:
                positions = torch.arange(past, past + length, device=given.input_ids.device)[None].expand(rows, -1)
            padding = given.attention_mask
            # where enough of a part is padding, its position-wise work runs on the real positions only
            ragged = ragged_plan(None if padding is None else padding[:, -length:])
            ids.append(given.input_ids.reshape(-1) if ragged is None else ragged.pack(given.input_ids))
            end = start + ids[-1].shape[0]
            dtype = self.embed.weight.dtype
            tables = [self._tables(k, positions, padding, dtype) for k in range(len(self.arch.ropes))]
            masks = _attention_masks(padding, positions, past, length, dtype, set(self.arch.windows))
            parts.append(Part(rows, length, ragged, start, end, tables, masks, given.cache))
            start = end
        x = F.embedding(ids[0] if len(ids) == 1 else torch.cat(ids), self.embed.weight)
        if self.embed_scale is not None:
            x = x * self.embed_scale.to(x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, parts, i)
        x = self.norm(x)
        out = []
        for p in parts:
            mine = x[p.start : p.end]
            out.append((mine.view(p.rows, p.length, -1) if p.ragged is None else p.ragged.unpack(mine), p.cache))
        return out

    def _tables(self, k: int, position_ids: torch.Tensor, padding: torch.Tensor | None, dtype):
        """The rotary tables of rope `k` for this pass. The per-pass kinds take each row's own
        frequencies, from its longest real position in the pass (padding positions left out), so a
        batch row rotates as it would alone (transformers shares the batch's longest across rows)."""
        rope = self.arch.ropes[k]
        if not rope.per_pass:
            return rotary_tables(position_ids, self.inv_freq[k], dtype, self.scalings[k])
        real = (
            position_ids if padding is None else position_ids.masked_fill(padding[:, -position_ids.shape[1] :] == 0, -1)
        )
        lengths = (real.max(dim=1).values + 1).tolist()
        found = {n: rope.frequencies(n) for n in set(lengths)}
        inv_freq = torch.stack([found[n][0] for n in lengths]).to(position_ids.device)
        return rotary_tables(position_ids, inv_freq, dtype, found[lengths[0]][1])  # the scaling is the kind's

    def new_cache(self) -> KVCache:
        return KVCache(len(self.layers))


def _attention_masks(padding, position_ids, past: int, length: int, dtype, windows: set) -> dict:
    """The additive masks [rows, 1, length, columns], one per sliding window in `windows` (None: the
    global layers'): causal by cache column, padding columns masked, and for a window w the
    columns w or more positions before the query's. A column's position is how many unmasked
    columns its row holds before it (the cache keeps each row's own positions in order, whatever
    padding and hidden drafts lie between), so a spliced batch row sees the window a lone sequence
    does. None where nothing is masked. A query row with nothing to attend to (a padding position)
    gets a uniform row, not NaN: its output is never used, but NaN keys or values would spread."""
    columns = past + length
    device = position_ids.device
    allowed = None
    if padding is not None or length > 1:
        allowed = torch.arange(columns, device=device)[None] <= torch.arange(past, columns, device=device)[:, None]
        allowed = allowed[None, None]
        if padding is not None:
            allowed = allowed & padding[:, None, None, -columns:].bool()
    masks = {None: allowed}
    for window in windows - {None}:
        if columns <= window:  # no column can be that far back
            masks[window] = allowed
            continue
        if padding is None:
            column_positions = torch.arange(columns, device=device)[None]
        else:
            column_positions = padding[:, -columns:].long().cumsum(-1) - 1
        near = column_positions[:, None, None, :] > position_ids[:, None, :, None] - window
        masks[window] = near if allowed is None else allowed & near
    return {w: None if a is None else _additive(a, dtype) for w, a in masks.items()}


def _additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


class NativeLlama(nn.Module):
    """A causal LM of one of `families.FAMILIES`, with the call surface of a transformers model."""

    def __init__(self, config: dict):
        super().__init__()
        a = self.arch = families.read(config)
        given = {k: v for k, v in config.items() if isinstance(k, str) and k.isidentifier()}
        self.config = SimpleNamespace(  # the checkpoint's config (context length, token ids), defaults filled in
            **{**given, "max_position_embeddings": a.max_positions, "vocab_size": a.vocab_size}
        )
        self.model = Body(a)
        self.lm_head = Linear(a.hidden_size, a.vocab_size)
        if a.tied:
            self.lm_head.weight = self.model.embed.weight

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def pack_for_cpu(self, choice: str = "auto") -> str | None:
        """Pack every matrix product but the embedding's lookup for the CPU (`cpu_kernels.pack`; `choice`:
        --kernel); returns the kernel's name, or None where products stay torch's own."""
        linears = [m for m in self.modules() if isinstance(m, Linear) and m is not self.model.embed]
        return pack(linears, self.lm_head, choice)

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
        logits = self.lm_head(hidden)
        if (cap := self.arch.final_softcap) is not None:  # Gemma: tanh(x / cap) * cap, as transformers
            logits = torch.tanh(logits / cap) * cap
        return LMOutput(logits, out.past_key_values)


# transformers' parameter names -> this module's, per layer; q/k/v and gate/up are concatenated
_LAYER = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "mlp_norm.weight"}
_GEMMA_LAYER = {  # Gemma's post-attention norm is the attention output's; its MLP has a norm before and after
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "attn_out_norm.weight",
    "pre_feedforward_layernorm.weight": "mlp_norm.weight",
    "post_feedforward_layernorm.weight": "mlp_out_norm.weight",
}
_FUSED = {
    "qkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "gate_up": ("mlp.gate_proj", "mlp.up_proj"),
}


def load(folder: Path, config: dict, dtype: torch.dtype, weights: dict[str, torch.Tensor] | None = None) -> NativeLlama:
    """A `NativeLlama` built without storage and given `weights` (Hugging Face names), else the
    weights in `folder`'s safetensors. Raises ValueError naming the first weight that is missing or
    has the wrong shape."""
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = dict(weights or {})
    for file in [] if weights is not None else weight_files(folder):
        state.update(load_file(str(file)))
    if _own_head(state, dtype):
        config = {**config, "tie_word_embeddings": False}
    model = NativeLlama(config)
    a = model.arch
    embed = state.pop("model.embed_tokens.weight", None)
    if embed is None and a.tied:
        embed = state.pop("lm_head.weight", None)  # a tied file may hold the twin under the other name
    ours: dict[str, torch.Tensor] = {
        "model.embed.weight": embed if embed is not None else _take(state, "model.embed_tokens.weight")
    }
    ours["model.norm.weight"] = _take(state, "model.norm.weight")
    biased = {"qkv": a.qkv_bias, "gate_up": a.mlp_bias}
    for i in range(a.layers):
        theirs, mine = f"model.layers.{i}.", f"model.layers.{i}."
        for name, target in (_GEMMA_LAYER if a.gemma else _LAYER).items():
            ours[mine + target] = _take(state, theirs + name)
        for target, parts in _FUSED.items():
            ours[f"{mine}{target}.weight"] = _rows([_take(state, f"{theirs}{p}.weight") for p in parts])
            if biased[target]:
                ours[f"{mine}{target}.bias"] = torch.cat([_take(state, f"{theirs}{p}.bias") for p in parts])
        for name, target, on in (("self_attn.o_proj", "o", a.o_bias), ("mlp.down_proj", "down", a.mlp_bias)):
            ours[f"{mine}{target}.weight"] = _take(state, f"{theirs}{name}.weight")
            if on:
                ours[f"{mine}{target}.bias"] = _take(state, f"{theirs}{name}.bias")
        if a.qk_norm:  # one weight for every query head, one for every key head: stacked per head
            q_norm, k_norm = (
                _take(state, f"{theirs}self_attn.q_norm.weight"),
                _take(state, f"{theirs}self_attn.k_norm.weight"),
            )
            ours[mine + "qk_norm.weight"] = torch.cat([q_norm.expand(a.heads, -1), k_norm.expand(a.kv_heads, -1)])
    if not a.tied:
        ours["lm_head.weight"] = _take(state, "lm_head.weight")
    expected = model.state_dict()
    for name, tensor in ours.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}")
    model.load_state_dict({k: v.to(dtype) for k, v in ours.items()}, strict=False, assign=True)
    if a.tied:
        model.lm_head.weight = model.model.embed.weight
    left = [name for name, p in model.named_parameters() if p.device.type == "meta"]
    if left:
        raise ValueError(f"weight {left[0]} is missing")
    return model.eval()


def _own_head(state: dict[str, torch.Tensor], dtype: torch.dtype) -> bool:
    """Whether the weights hold an `lm_head.weight` other than the embeddings (in `dtype`): transformers
    then keeps it even where the config ties the two ("both are present in the checkpoints with
    different values, so we will NOT tie them"), and so does this forward."""
    head, embed = state.get("lm_head.weight"), state.get("model.embed_tokens.weight")
    if head is None or embed is None:
        return False
    return head.shape != embed.shape or not torch.equal(head.to(dtype), embed.to(dtype))


def _rows(parts: list[torch.Tensor]) -> torch.Tensor:
    """`torch.cat(parts)`; where the parts already lie one after another in one storage (a GGUF
    recipe lays q/k/v and gate/up out so: `gguf_recipe.load_state`), a view of them, with no copy."""
    first = parts[0]
    at = first.storage_offset()
    for p in parts:
        adjacent = p.untyped_storage().data_ptr() == first.untyped_storage().data_ptr() and p.storage_offset() == at
        if not (adjacent and p.is_contiguous() and p.dtype == first.dtype and p.shape[1:] == first.shape[1:]):
            return torch.cat(parts)
        at += p.numel()
    rows = sum(p.shape[0] for p in parts)
    return first.as_strided((rows, *first.shape[1:]), first.stride(), first.storage_offset())


def _take(state: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    if name not in state:
        raise ValueError(f"weight {name} is missing")
    return state.pop(name)
