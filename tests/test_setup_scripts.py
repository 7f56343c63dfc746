"""scripts/xgrammar_without_triton.py: what `make setup` installs for xgrammar on a machine without CUDA."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _script():
    path = ROOT / "scripts" / "xgrammar_without_triton.py"
    spec = importlib.util.spec_from_file_location("xgrammar_without_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_xgrammar_extra_is_read_from_pyproject():
    assert _names(_script().extra_requirements("xgrammar")) == {"xgrammar"}


def test_xgrammar_requirements_without_triton():
    try:
        importlib.metadata.distribution("xgrammar")  # its metadata only: importing it would import torch
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("xgrammar is not installed")
    wanted = _names(_script().requirements_of("xgrammar"))
    assert "triton" not in wanted  # CUDA-only: ~1 GB
    assert {"apache-tvm-ffi", "torch", "transformers", "numpy", "pydantic"} <= wanted
    assert not wanted & {"pytest", "protobuf", "tiktoken", "mlx-lm"}  # its own extras' requirements stay out


def test_the_skip_list_is_honoured_for_any_distribution():
    script = _script()
    assert "referencing" in _names(script.requirements_of("jsonschema", skipped=frozenset()))
    assert "referencing" not in _names(script.requirements_of("jsonschema", skipped={"referencing"}))
