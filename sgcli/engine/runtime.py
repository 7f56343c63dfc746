"""One interface to whichever forward pass runs the model: sgcli's own (`engine/llama.py`) or transformers'.

Why: the decode loop, batching, shared prompt heads and jump-forward drive a model through a few
operations: a pass over new tokens (a prefill, a single step, a draft, a batched step) that fills
a KV cache, logits for the last positions, an empty cache or one built from spliced tensors. Each
`Runtime` implements them for its forward and declares what it supports (`Supports`) when it is
built, so no caller asks the model what it is (no hasattr, no reading of signatures); the loader
builds one, after `impl_choice.choose_impl` decided which.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from sgcli.engine.flags import TORCH_KERNEL
from sgcli.engine.head import OutputHead
from sgcli.engine.kv import KVCache
from sgcli.engine.ragged import PassInput
from sgcli.errors import UserError


class Cache(Protocol):
    """A KV cache as the engine touches it (`kv.KVCache`, transformers' `DynamicCache`): per layer
    `keys` and `values` [rows, kv heads, columns, head width] (set through `kv.replace`)."""

    layers: list

    def get_seq_length(self, layer_idx: int = 0) -> int: ...

    def crop(self, max_length: int) -> None: ...


@dataclass(frozen=True)
class Supports:
    """What a runtime can do, declared when it is built."""

    crop: bool  # its caches drop their last columns: the single-stream loop's jump-forward drafts
    splice: str | None  # None: every cache layer simply grows, so batching splices rows and columns; else why not
    parts: bool = False  # `hidden_parts`: one pass over several groups of rows with caches of their own


class Runtime(Protocol):
    """A loaded model's forward pass, as the engine drives it."""

    impl: str  # "native" (sgcli.engine.llama) or "transformers": the record's model_impl
    module: torch.nn.Module  # the torch model itself (moved, evaluated, checked for damaged weights)
    supports: Supports

    def hidden(
        self,
        input_ids: torch.Tensor,
        cache: Cache | None,
        *,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        use_cache: bool = True,
    ) -> tuple[torch.Tensor, Cache | None]:
        """One pass over `input_ids` [rows, positions] after what `cache` holds (a prefill, a
        single step, a draft, a batched step with padding `attention_mask` over every cache column
        and explicit `position_ids`): the last hidden states [rows, positions, width] and the cache
        holding the new keys and values (the model's own new one where `cache` is None)."""
        ...

    def hidden_parts(self, parts: Sequence[PassInput]) -> list[tuple[torch.Tensor, Cache | None]]:
        """Where `supports.parts`: `hidden` over several parts in one pass (a batch's decode step
        beside the prefill of the rows joining it), each part's rows with their own cache, padding
        mask and positions: the weights are read once for all, and padding costs no matrix work."""
        ...

    def logits(self, input_ids: torch.Tensor, cache: Cache | None, keep: int) -> tuple[torch.Tensor, Cache | None]:
        """The model's own float logits [rows, keep, vocab] for the last `keep` positions of a pass
        (what runs where `head()` is None), and the cache."""
        ...

    def head(self) -> OutputHead | None:
        """The output projection apart from the body, where projecting `hidden`'s states gives the
        model's logits (None elsewhere: the loops then use `logits`)."""
        ...

    def new_cache(self) -> Cache | None:
        """An empty cache (None where the runtime cannot build one: the model then makes its own)."""
        ...

    def cache_from(self, layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Cache:
        """A cache holding these keys and values per layer (spliced shared prompt heads)."""
        ...

    def context_length(self) -> int | None:
        """The model's context window in tokens, where its config says."""
        ...

    def logits_width(self) -> int:
        """How many logits a position gets (the output projection's rows; may exceed the vocabulary)."""
        ...

    def pack_for_cpu(self, choice: str = "auto") -> str | None:
        """Give the matrix products the CPU's fastest kernel, or the one `choice` (--kernel) pins; its
        name (None: torch's own)."""
        ...


class NativeRuntime:
    """sgcli's own forward (`sgcli.engine.llama.NativeLlama`): its caches are `kv.KVCache`, which
    crop and splice; its logits are its output head's, by construction."""

    impl = "native"
    supports = Supports(crop=True, splice=None, parts=True)

    def __init__(self, model):
        self.module = model
        self._head = OutputHead(model.lm_head, softcap=model.arch.final_softcap)

    def hidden(self, input_ids, cache, *, attention_mask=None, position_ids=None, use_cache=True):
        out = self.module.model(input_ids, attention_mask, position_ids, cache, use_cache)
        return out.last_hidden_state, out.past_key_values

    def hidden_parts(self, parts):
        return self.module.model.passes(list(parts))

    def logits(self, input_ids, cache, keep):
        hidden, cache = self.hidden(input_ids, cache)
        return self._head.logits(hidden[:, -keep:]), cache

    def head(self) -> OutputHead:
        return self._head

    def new_cache(self) -> KVCache:
        return self.module.new_cache()

    def cache_from(self, layers) -> KVCache:
        return KVCache(layers)

    def context_length(self) -> int | None:
        return _positive(vars(self.module.config).get("max_position_embeddings"))

    def logits_width(self) -> int:
        return self.module.lm_head.weight.shape[0]

    def pack_for_cpu(self, choice: str = "auto") -> str | None:
        return self.module.pack_for_cpu(choice)


def cache_keyword(version: str) -> str:
    """The name transformers `version` gives the cache argument of a forward and the cache field of
    its outputs: `cache` from 5.24 on, `past_key_values` before (5.24 renamed it in every model;
    checked against the 5.22, 5.23 and 5.24 wheels)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    major_minor = (int(found[1]), int(found[2])) if found else (0, 0)
    return "cache" if major_minor >= (5, 24) else "past_key_values"


class TransformersRuntime:
    """A transformers `PreTrainedModel`: its caches are transformers' own (`DynamicCache` of its config,
    sliding-window layers kept full: `new_cache` says why); its output head is used only where a
    probe shows it gives the model's logits (soft-capping, scaling: `OutputHead`)."""

    impl = "transformers"

    def __init__(self, model):
        import transformers
        from transformers.cache_utils import DynamicLayer

        self.module = model
        self.keyword = cache_keyword(transformers.__version__)
        self._head: OutputHead | None | object = _UNCHECKED
        kinds = _config_cache(model.config)  # the layers transformers' own cache would give: what slides
        plain = kinds is not None and bool(kinds.layers) and all(type(layer) is DynamicLayer for layer in kinds.layers)
        self.supports = Supports(
            crop=(cache := self.new_cache()) is not None and bool(cache.layers) and cache.is_croppable,
            # sliding and hybrid models stay unspliced: their masks' windows were never checked on spliced rows
            splice=_batch_rope(model.config)
            or (None if plain else "it uses a sliding-window or hybrid KV cache, which batching does not splice"),
        )

    def hidden(self, input_ids, cache, *, attention_mask=None, position_ids=None, use_cache=True):
        if cache is None and use_cache:
            cache = self.new_cache()  # else the model builds one from its config (`new_cache` says why not)
        out = self.module.base_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            **{self.keyword: cache},
        )
        return out.last_hidden_state, out.get(self.keyword)

    def hidden_parts(self, parts):
        raise NotImplementedError("transformers' forward runs one group of rows a pass (supports.parts is False)")

    def logits(self, input_ids, cache, keep):
        cache = self.new_cache() if cache is None else cache
        out = self.module(input_ids=input_ids, use_cache=True, logits_to_keep=keep, **{self.keyword: cache})
        return out.logits.float(), out.get(self.keyword)

    def head(self) -> OutputHead | None:
        """Built and checked on first use (a probe pass), then kept."""
        if self._head is _UNCHECKED:
            self._head = self._checked_head()
        return self._head

    def _checked_head(self) -> OutputHead | None:
        model = self.module
        projection = model.get_output_embeddings()
        if model.base_model is model or projection is None:
            return None
        config = model.config.to_dict()
        head = OutputHead(
            projection,
            scale=config.get("logit_scale"),  # Cohere multiplies
            divisor=config.get("logits_scaling"),  # Granite divides
            softcap=config.get("final_logit_softcapping"),  # Gemma 2 and 3
        )
        return head if self._matches(head) else None

    def _matches(self, head: OutputHead) -> bool:
        """Whether `head` gives the model's own logits, on a probe input of 3 tokens: to 1e-3, or in
        half precision to 4 of its roundings (the model rounds after each scaling step, the head
        once: `OutputHead._finish`); a scaling or cap left out differs by far more."""
        device = next(self.module.parameters()).device
        ids = torch.arange(3, device=device)[None] % self.module.config.vocab_size
        try:
            with torch.inference_mode():
                raw = self.module(input_ids=ids, use_cache=False).logits[0]
                got = head.logits(self.hidden(ids, None, use_cache=False)[0][0])
        except (ValueError, RuntimeError, TypeError, IndexError) as exc:  # the first pass the model makes
            raise _cannot_run(self.module, exc) from None
        tolerance = max(1e-3, 4 * torch.finfo(raw.dtype).eps) if raw.is_floating_point() else 1e-3
        expected = raw.float()
        return got.shape == expected.shape and torch.allclose(got, expected, rtol=tolerance, atol=tolerance)

    def new_cache(self):
        """transformers' cache for the model's config, its sliding-window layers replaced by full ones
        (None where the config cannot be read: the model then makes its own). The model's masks apply
        each layer's window over absolute positions whatever the cache keeps, so full layers give the
        uncached forward's logits; the config's sliding layers drop keys where the attention does not
        slide (a Llama config.json with a `sliding_window`, which Llama's attention ignores) or still
        needs them (Mistral's `sliding_window` 1), and cached decoding then differed from the forward
        by up to 12 in the logits. Other kinds (recurrent, hybrid, shared) stay the config's."""
        from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

        cache = _config_cache(self.module.config)
        if cache is not None:
            cache.layers = [DynamicLayer() if type(lay) is DynamicSlidingWindowLayer else lay for lay in cache.layers]
        return cache

    def cache_from(self, layers):
        from transformers.cache_utils import DynamicCache

        return DynamicCache(ddp_cache_data=layers)

    def context_length(self) -> int | None:
        config = self.module.config.to_dict()
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            if (value := _positive(config.get(name))) is not None:
                return value
        return None

    def logits_width(self) -> int:
        return self.module.get_output_embeddings().weight.shape[0]

    def pack_for_cpu(self, choice: str = "auto") -> None:
        if choice not in ("auto", TORCH_KERNEL):  # transformers' products stay torch's own
            raise UserError(
                f"--kernel {choice} is a kernel of sgcli's native forward; this model runs on transformers",
                hint="use --kernel auto or torch, or --model-impl native where the model fits it",
            )
        return None


_UNCHECKED = object()  # a transformers runtime's head before its first use


def _config_cache(config):
    """transformers' own cache for `config` (its layers say which slide), None where it cannot read it."""
    from transformers.cache_utils import DynamicCache

    try:
        return DynamicCache(config=config)
    except (TypeError, ValueError, AttributeError):
        return None


def _batch_rope(config) -> str | None:
    """Why transformers' rotary embedding makes a batched row differ from the row alone (None where
    it does not): its LongRoPE picks the long or short factors from the longest position of the
    whole batch (`engine/rope.py`), so rows short of `original_max_position_embeddings` rotate with
    the long ones' factors once another row passes it (6 of 8 rows differed in a tester's batch)."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if not isinstance(params, dict):
        return None
    nested = [p for p in params.values() if isinstance(p, dict)] or [params]
    kinds = {p.get("rope_type", p.get("type")) for p in nested}
    if "longrope" in kinds:
        return "transformers' longrope rotary embedding takes a whole batch's longest position for every row"
    return None


def _cannot_run(model, exc: Exception) -> UserError:
    """transformers' forward failing on its first pass: the config asks for what it cannot compute
    (sliding layers without a window, a partial rotary embedding with a scaling), not a bug in sgcli."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return UserError(
        f"transformers' {type(model).__name__} cannot run this model's config: {type(exc).__name__}: {first}",
        hint="its config.json asks for something its code does not compute; compare it with the model's original",
    )


def _positive(value) -> int | None:
    return value if isinstance(value, int) and value > 0 else None
