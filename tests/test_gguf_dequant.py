"""sgcli's numpy dequantizers (`sgcli.engine.gguf_dequant`) give, bit for bit, what gguf-py's numpy
`dequantize` gives (what transformers' GGUF conversion uses), on random blocks of every type; and
the stdlib tensor directory reader agrees with gguf-py's reader."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from sgcli.engine import gguf_dequant  # noqa: E402

NAMES = [name for name, _, _ in gguf_dequant.TYPES.values()]


def test_the_type_table_is_ggmls():
    for ggml_type, (name, block, size) in gguf_dequant.TYPES.items():
        qtype = gguf.GGMLQuantizationType(ggml_type)
        assert qtype.name == name
        assert gguf.GGML_QUANT_SIZES[qtype] == (block, size)


def _random_bytes(name: str, rows: int, blocks_per_row: int, seed: int) -> tuple[np.ndarray, tuple[int, int]]:
    """Random bytes for `rows` rows of `blocks_per_row` blocks; float scales kept finite half the time
    (random bytes make some NaN and infinite scales, which must come out the same too)."""
    ggml_type = next(t for t, (n, _, _) in gguf_dequant.TYPES.items() if n == name)
    _, block, size = gguf_dequant.TYPES[ggml_type]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(rows, blocks_per_row * size), dtype=np.uint8)
    if seed % 2 and name in ("F16", "BF16", "F32"):
        dtype = {"F16": np.float16, "F32": np.float32}.get(name)
        values = rng.standard_normal(rows * blocks_per_row).astype(np.float32)
        if dtype is None:  # bf16: the high half of a float32
            data = (values.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
        else:
            data = values.astype(dtype).view(np.uint8).reshape(rows, -1)
    return data, (rows, blocks_per_row * block)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("name", NAMES)
def test_dequantize_is_bit_identical_to_gguf_py(name, seed):
    ggml_type = next(t for t, (n, _, _) in gguf_dequant.TYPES.items() if n == name)
    # gguf-py works over groups of 16 rows; the large case holds blocks whose scale and minimum are
    # both NaN (random bytes: ~1 block in 1,000), which must keep gguf-py's NaNs; it spans several chunks
    rows, blocks = {0: (3, 5), 1: (3, 5), 2: (17, 2), 3: (17, 2), 4: (64, 200)}[seed]
    data, shape = _random_bytes(name, rows, blocks, seed)
    expected = gguf.dequantize(data, gguf.GGMLQuantizationType(ggml_type))
    assert expected.dtype == np.float32 and expected.shape == shape
    assert gguf_dequant.nbytes(ggml_type, shape) == data.size
    got = gguf_dequant.dequantize(data.reshape(-1).copy(), ggml_type, shape)
    assert got.dtype == np.float32 and got.shape == shape
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_signalling_nan_scales_keep_their_payload_as_in_numpy():
    """torch widens float16 0xfd4d (a signalling NaN) to 0x7fffffff, numpy to 0xffa9a000: what a
    damaged scale in a block becomes must still be gguf-py's bits."""
    block = np.zeros(34, dtype=np.uint8)
    block[:2] = np.array([0xFD4D], dtype=np.uint16).view(np.uint8)
    block[2:] = 3
    expected = gguf.dequantize(block.reshape(1, -1), gguf.GGMLQuantizationType.Q8_0)
    got = gguf_dequant.dequantize(block, 8, (1, 32))
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    halves = np.array([0xFD4D, 0x7C01, 0x3C00], dtype=np.uint16).view(np.uint8)
    expected = gguf.dequantize(halves, gguf.GGMLQuantizationType.F16)
    got = gguf_dequant.dequantize(halves.copy(), 1, (3,))
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_a_row_that_is_not_whole_blocks_is_refused():
    with pytest.raises(ValueError, match="whole Q4_K blocks"):
        gguf_dequant.nbytes(12, (4, 100))
    with pytest.raises(ValueError, match="not dequantized"):
        gguf_dequant.nbytes(16, (4, 256))  # IQ2_XXS: transformers' float32 copy is kept instead


def test_the_tensor_directory_matches_gguf_py(tmp_path):
    from sgcli.tokenizers.gguf_meta import read_tensor_index

    path = tmp_path / "t.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(0)
    writer.add_tensor("a", rng.standard_normal((3, 64)).astype(np.float32))
    q = gguf.quantize(rng.standard_normal((2, 256)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("b", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("c", rng.standard_normal(7).astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader = gguf.GGUFReader(str(path))
    expected = [
        (t.name, tuple(int(d) for d in reversed(t.shape)), int(t.tensor_type), int(t.data_offset))
        for t in reader.tensors
    ]
    assert [(t.name, t.shape, t.ggml_type, t.offset) for t in read_tensor_index(path)] == expected
    assert expected[1][1] == (2, 256) and expected[1][2] == 8
