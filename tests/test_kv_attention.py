"""The native forward's KV cache buffers and its short-query attention (sgcli.engine.kv, .cpu_attention).

The cache appends into spare columns of buffers it owns: its views must hold what concatenating
would, and tensors it was given (a shared prompt head, a spliced batch) must never be written
into, even after a crop. bfloat16 attention of few positions on a CPU runs as two products and a
softmax: it must agree with `scaled_dot_product_attention` (grouped heads, masks, a padding row
that attends to nothing) and hand longer queries and float32 to it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sgcli.engine import cpu_attention, llama
from sgcli.engine.kv import GROW_COLUMNS, KVCache, KVLayer, replace


def _columns(n: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    keys = torch.arange(start, start + n, dtype=torch.float32).view(1, 1, n, 1).expand(2, 3, n, 4).clone()
    return keys, -keys


def test_appends_hold_what_concatenating_would():
    cache, want_k, want_v = KVCache(2), [], []
    start = 0
    for n in (5, 1, 1, 3, GROW_COLUMNS, 1):  # the fourth append fills the first buffer; the fifth grows it
        k, v = _columns(n, start)
        start += n
        got_k, got_v = cache.update(k, v, 1)
        want_k.append(k)
        want_v.append(v)
        assert torch.equal(got_k, torch.cat(want_k, dim=-2)) and torch.equal(got_v, torch.cat(want_v, dim=-2))
    assert cache.get_seq_length(1) == start and cache.layers[1].owned
    assert cache.layers[1]._keys.shape[-2] > start  # room left for the next steps


def test_given_tensors_are_never_written_into_even_after_a_crop():
    head_k, head_v = _columns(6)
    kept_k, kept_v = head_k.clone(), head_v.clone()
    cache = KVCache([(head_k, head_v)])
    cache.crop(-2)  # a draft turned down over the shared head's tensors
    k, v = _columns(3, 100)
    got_k, _ = cache.update(k, v, 0)
    assert torch.equal(head_k, kept_k) and torch.equal(head_v, kept_v)
    assert torch.equal(got_k, torch.cat([kept_k[..., :4, :], k], dim=-2))
    cache.crop(2)  # an owned buffer now: a crop, then an append, overwrite its own columns only
    got_k, got_v = cache.update(*_columns(1, 200), 0)
    assert got_k[0, 0, :, 0].tolist() == [0, 1, 200] and got_v[0, 0, :, 0].tolist() == [0, -1, -200]


def test_replace_sets_a_layer_of_either_kind():
    layer = KVLayer(*_columns(4))
    layer.append(*_columns(1, 4))
    k, v = _columns(2, 50)
    replace(layer, k, v)
    assert layer.keys.data_ptr() == k.data_ptr() and layer.values.data_ptr() == v.data_ptr()  # held, not copied
    assert (layer.length, layer.owned) == (2, False)

    class Plain:  # transformers' DynamicLayer: plain attributes
        keys = values = None

    plain = Plain()
    replace(plain, k, v)
    assert plain.keys is k and plain.values is v


def _attention_inputs(rows: int, length: int, columns: int, heads: int = 6, kv_heads: int = 2):
    torch.manual_seed(rows * 100 + length)
    q = torch.randn(rows, heads, length, 8)
    k, v = torch.randn(rows, kv_heads, columns, 8), torch.randn(rows, kv_heads, columns, 8)
    allowed = torch.ones(rows, 1, length, columns, dtype=torch.bool)
    allowed[0, :, :, : columns // 2] = False  # a left-padded row
    allowed[-1, :, -1, :] = False  # a padding position: attends to nothing
    mask = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.bfloat16).min)
    return q, k, v, mask


@pytest.mark.parametrize("length", [1, 4, cpu_attention.SHORT_QUERIES])
def test_short_bfloat16_attention_agrees_with_the_fused_kernel(length, monkeypatch):
    q, k, v, mask = _attention_inputs(3, length, 20)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    fused = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        cpu_attention.F, "scaled_dot_product_attention", lambda *a, **kw: fused.append(1) or sdpa(*a, **kw)
    )
    half = [t.bfloat16() for t in (q, k, v, mask)]
    got = cpu_attention.attend(*half).float()
    assert fused == [] and got.shape == want.shape and torch.isfinite(got).all()
    assert torch.allclose(got, want, atol=0.03, rtol=0.03), (got - want).abs().max()
    unmasked = cpu_attention.attend(*half[:3], None).float()
    assert torch.allclose(unmasked, sdpa(q, k, v, enable_gqa=True), atol=0.03, rtol=0.03)


def test_long_queries_and_float32_take_the_fused_kernel(monkeypatch):
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        cpu_attention.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or sdpa(*a, **kw)
    )
    q, k, v, mask = _attention_inputs(2, cpu_attention.SHORT_QUERIES + 1, 40)
    cpu_attention.attend(*(t.bfloat16() for t in (q, k, v, mask)))
    q, k, v, mask = _attention_inputs(2, 1, 40)
    assert torch.equal(cpu_attention.attend(q, k, v, mask), sdpa(q, k, v, attn_mask=mask, enable_gqa=True))
    assert calls == [1, 1]


@pytest.mark.parametrize("wins", [True, False])
def test_a_single_bfloat16_row_takes_the_kernel_the_probe_measured_faster(wins, monkeypatch):
    """One row (a single stream) takes the fused kernel where `single_row_sdpa_wins` measured it
    faster, the two products where not, and both agree with the fused kernel in float32;
    several rows keep the two products either way."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        cpu_attention.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or sdpa(*a, **kw)
    )
    monkeypatch.setattr(cpu_attention, "single_row_sdpa_wins", lambda: wins)
    monkeypatch.setattr(cpu_attention, "single_row_widened_wins", lambda: False)
    for length in (1, 4):
        q, k, v, mask = _attention_inputs(1, length, 20)
        want = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
        got = cpu_attention.attend(*(t.bfloat16() for t in (q, k, v, mask))).float()
        assert torch.allclose(got, want, atol=0.03, rtol=0.03), (got - want).abs().max()
    assert calls == ([1, 1] if wins else [])
    cpu_attention.attend(*(t.bfloat16() for t in _attention_inputs(2, 1, 20)))
    assert calls == ([1, 1] if wins else [])


@pytest.mark.parametrize("length", [1, 4])
def test_a_single_bfloat16_row_widened_to_float32_is_float32_attention_rounded_once(length, monkeypatch):
    """Where `single_row_widened_wins` measured it faster, one row's bfloat16 attention over up to
    WIDENED_COLUMNS columns runs in float32: exactly the fused float32 kernel on the widened inputs,
    rounded to bfloat16 at the end (masked or not); past the cap, or with several rows, it does not."""
    monkeypatch.setattr(cpu_attention, "single_row_widened_wins", lambda: True)
    monkeypatch.setattr(cpu_attention, "single_row_sdpa_wins", lambda: False)
    for masked in (True, False):
        q, k, v, mask = (t.bfloat16() for t in _attention_inputs(1, length, 20))
        mask = mask if masked else None
        want = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), attn_mask=None if mask is None else mask.float(), enable_gqa=True
        ).bfloat16()
        assert torch.equal(cpu_attention.attend(q, k, v, mask), want)
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(
        cpu_attention.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(a[0].dtype) or sdpa(*a, **kw)
    )
    wide = cpu_attention.WIDENED_COLUMNS + 1
    cpu_attention.attend(*(t.bfloat16() for t in _attention_inputs(1, length, wide)))  # past the cap
    cpu_attention.attend(*(t.bfloat16() for t in _attention_inputs(2, length, 20)))  # two rows
    assert calls == []
    q, k, v, _ = (t.bfloat16() for t in _attention_inputs(1, length, wide))
    cpu_attention.attend(q, k, v, _attention_inputs(1, length, 20)[3].bfloat16(), columns=20)  # the columns used count
    assert calls == [torch.float32]


def test_the_widened_probe_answers_once_a_process():
    cpu_attention.single_row_widened_wins.cache_clear()
    answer = cpu_attention.single_row_widened_wins()
    assert isinstance(answer, bool) and cpu_attention.single_row_widened_wins() is answer
    assert cpu_attention.single_row_widened_wins.cache_info().misses == 1


def test_the_single_row_probe_answers_once_a_process():
    cpu_attention.single_row_sdpa_wins.cache_clear()
    answer = cpu_attention.single_row_sdpa_wins()
    assert isinstance(answer, bool) and cpu_attention.single_row_sdpa_wins() is answer
    assert cpu_attention.single_row_sdpa_wins.cache_info().misses == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("masked", [True, False])
def test_spare_buffer_columns_are_never_attended_to(dtype, masked):
    """The forward hands attention the cache's whole buffers (`KVCache.whole`) and how many
    columns are filled: spare columns, zeros or left over from a crop, change nothing."""
    q, k, v, mask = _attention_inputs(3, 2, 20)
    q, k, v, mask = (t.to(dtype) for t in (q, k, v, mask))
    mask = mask if masked else None
    spare_k = torch.cat([k, torch.full_like(k[:, :, :7], 50.0)], dim=-2)  # large: would dominate if read
    spare_v = torch.cat([v, torch.full_like(v[:, :, :7], -50.0)], dim=-2)
    want = cpu_attention.attend(q, k, v, mask)
    got = cpu_attention.attend(q, spare_k, spare_v, mask, columns=20)
    assert torch.allclose(got.float(), want.float(), atol=1e-2 if dtype == torch.bfloat16 else 1e-6)


def test_the_forward_over_grown_buffers_gives_the_logits_of_no_cache(tmp_path):
    """A cache grown in place (spare columns in every layer, read by the attention) gives, step
    after step, the logits of the whole sequence run without a cache, in bfloat16 (the
    two-product attention) and float32."""
    import json

    from helpers import random_llama

    random_llama(300, initializer_range=0.3).model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    model = llama.load(tmp_path, config, torch.float32)
    ids = torch.tensor([[5, 17, 90, 42, 7, 7, 30, 11, 3, 200, 4]])
    for dtype in (torch.bfloat16, torch.float32):
        model = model.to(dtype)
        with torch.inference_mode():
            cache = model.new_cache()
            model(input_ids=ids[:, :4], past_key_values=cache)
            for t in range(4, ids.shape[1]):
                got = model(input_ids=ids[:, t : t + 1], past_key_values=cache).logits.float()
                assert cache.layers[0]._keys.shape[-2] > cache.get_seq_length()  # spare columns read
                want = model(input_ids=ids[:, : t + 1]).logits[:, -1:].float()  # no cache at all
                assert torch.allclose(got, want, atol=0.05 * want.abs().max().item()), (dtype, t)
