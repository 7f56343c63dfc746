"""`--model-impl auto` on an accelerator: transformers until benchmarks/gpu_check.sh checked the
native forward on that device, then the native forward; the record says why (no GPU needed)."""

from __future__ import annotations

import pytest

from sgcli.engine import device_checks
from sgcli.engine.loader import choose_impl
from sgcli.models.refs import ModelRef


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(device_checks, "device_key", lambda device: f"{device} FakeGPU 80GB torch 2.x")
    return tmp_path


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    from helpers import random_llama

    folder = tmp_path_factory.mktemp("llama")
    random_llama(64).model.save_pretrained(folder)
    return folder


def test_the_cpu_is_always_trusted(cache):
    assert device_checks.untrusted_reason("cpu") is None


def test_an_unchecked_gpu_names_the_check_that_would_trust_it(cache):
    reason = device_checks.untrusted_reason("cuda:0")
    assert reason is not None and "gpu_check.sh" in reason and "FakeGPU" in reason


def test_a_passed_check_is_trusted_and_a_failed_one_is_not(cache):
    device_checks.record("cuda:0", {"passed": False, "faster": True, "max_logit_diff": 0.5})
    assert not device_checks.passed("cuda:0")
    device_checks.record("cuda:0", {"passed": True, "faster": True, "max_logit_diff": 0.01})
    assert device_checks.passed("cuda:0") and device_checks.untrusted_reason("cuda:0") is None
    assert not device_checks.passed("cuda:1")  # another device: its own check


def test_a_right_but_slower_native_forward_stays_untrusted_and_says_so(cache):
    """As measured on an H200: the native forward within its bounds, its decode loop slower there."""
    speed = "batch 16: native 89.0 vs transformers 715.1 tok/s"
    device_checks.record("cuda:0", {"passed": True, "faster": False, "speed": speed})
    reason = device_checks.untrusted_reason("cuda:0")
    assert not device_checks.passed("cuda:0")
    assert reason is not None and "measured slower than transformers" in reason and speed in reason


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"cuda:0 FakeGPU 80GB torch 2.x": "yes"}'])
def test_a_damaged_checks_file_trusts_nothing(cache, content):
    path = device_checks.checks_file()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert device_checks.untrusted_reason("cuda:0") is not None


def test_auto_runs_transformers_on_an_unchecked_gpu_and_native_after_the_check(cache, llama_folder):
    ref = ModelRef("dir", str(llama_folder), "tiny")
    assert choose_impl(ref, "auto", {}, "cpu") == (True, None)
    native, reason = choose_impl(ref, "auto", {}, "cuda:0")
    assert native is False and "gpu_check.sh" in reason
    assert choose_impl(ref, "native", {}, "cuda:0") == (True, None)  # asked for: runs, the user's call
    assert choose_impl(ref, "transformers", {}, "cuda:0") == (False, None)
    device_checks.record("cuda:0", {"passed": True, "faster": False})  # right, but slower there
    assert choose_impl(ref, "auto", {}, "cuda:0")[0] is False
    device_checks.record("cuda:0", {"passed": True, "faster": True})
    assert choose_impl(ref, "auto", {}, "cuda:0") == (True, None)
