"""A cache path holding a FIFO, a device or a folder instead of a file is a damaged entry: skipped
(or replaced) with a notice, never opened blocking. A FIFO there hung `sgcli compile` forever, past
--compile-timeout, which does not cover the cache read (the compiled entries: test_compile_cmd)."""

from __future__ import annotations

import json
import os

import pytest
from helpers import bounded_hang

from sgcli.cache.paths import cache_root


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _fifo(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def test_a_probe_record_that_is_a_fifo_is_no_record(tmp_path):
    from sgcli.backends.compile_cache import _probe_passed
    from sgcli.limits import current_limits

    path = tmp_path / "k.probe"
    _fifo(path)
    with bounded_hang(30):
        assert _probe_passed(path, "k", current_limits()) is False


def test_a_kernel_probe_file_that_is_a_fifo_is_measured_again():
    from sgcli.engine import kernel_probes

    path = cache_root() / "kernels" / kernel_probes.FILE
    _fifo(path)
    with bounded_hang(30), pytest.warns(UserWarning, match="is unreadable or of another format: measuring again"):
        assert kernel_probes._read(path) == {}


def test_a_device_checks_file_that_is_a_fifo_trusts_nothing(monkeypatch):
    from sgcli.engine import device_checks

    monkeypatch.setattr(device_checks, "device_key", lambda device: f"{device} FakeGPU")
    _fifo(device_checks.checks_file())
    with bounded_hang(30):
        assert device_checks.untrusted_reason("cuda:0") is not None


@pytest.mark.parametrize("what", ["manifest", "an empty file"])
def test_a_converted_folder_holding_a_fifo_is_damaged(tmp_path, what):
    from sgcli.cache import conversions

    source, folder = tmp_path / "m.gguf", tmp_path / "conv"
    source.write_bytes(b"gguf")
    folder.mkdir()
    (folder / "empty.txt").write_bytes(b"")  # size 0 whatever replaces it: the mtime then asks for a full hash
    conversions.write_manifest(folder, source)
    if what == "manifest":
        _fifo(folder / conversions.MANIFEST)
    else:
        _fifo(folder / "empty.txt")
        manifest = json.loads((folder / conversions.MANIFEST).read_text())
        manifest["files"]["empty.txt"]["mtime_ns"] -= 1
        (folder / conversions.MANIFEST).write_text(json.dumps(manifest))
    with bounded_hang(30):
        found = conversions.problem(folder)
    assert found == (
        "its manifest sgcli-converted.json is unreadable" if what == "manifest" else "empty.txt is not a regular file"
    )
