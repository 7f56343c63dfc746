"""The README's commands run from a clone: every input file they name is in the repository."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT_FLAGS = {"--output", "-o", "--plot"}  # what these name is written, not read
FILE_SUFFIX = re.compile(r"\.(json|jsonl|gbnf|ebnf|lark|regex|yaml|gguf|toml)$")


def readme_commands() -> list[list[str]]:
    """Each `sgcli ...` command of the README's sh blocks, as its words (comments and line breaks gone)."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "sgcli":
                commands.append(words)
    return commands


def input_paths(words: list[str]) -> list[str]:
    """The files and folders a command reads: FILE arguments and flag values (`--sub NAME=FILE`,
    `--ref-base URL=DIR` too), not what it writes."""
    paths = []
    for before, word in zip([None, *words], words):
        if before in OUTPUT_FLAGS or word.startswith("-"):
            continue
        value = word.rsplit("=", 1)[-1]
        if value.startswith(("examples/", "sgcli/")) or FILE_SUFFIX.search(value):
            paths.append(value)
    return paths


def test_every_file_a_readme_command_reads_is_in_the_repository():
    """The tour named s.json, grammar.gbnf, ci.json, chat.json... that examples/ did not hold."""
    commands = readme_commands()
    named = [p for words in commands for p in input_paths(words)]
    assert len(commands) > 30 and len(named) > 25, (len(commands), named)
    missing = sorted({p for p in named if not (ROOT / p).exists()})
    assert not missing, f"README commands name files the repository lacks: {missing}"


UNBOUNDED = re.compile(r"(?<!\\)[+*]|\{\d+,\}")  # a regex repetition with no upper bound


def _default_model_generations() -> list[tuple[str, str]]:
    """(--regex or --schema, its value) of each `sgcli generate` in the README and generate's --help examples
    that runs the default model; a schema piped in (`echo '...' | sgcli generate --schema -`) is the echoed text."""
    from sgcli.cli.generate import EXAMPLES

    text = (ROOT / "README.md").read_text()
    found = []
    for block in [*re.findall(r"```sh\n(.*?)```", text, re.S), EXAMPLES]:
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if "generate" not in words or {"--model", "-m", "--engine"} & set(words):
                continue
            piped = words[1] if words[0] == "echo" else None
            for flag, value in zip(words, words[1:]):
                if flag == "--regex" or flag == "--schema" and value.startswith(("-", "{")):
                    found.append((flag, piped if value == "-" else value))
    return found


def test_the_number_examples_are_bounded_so_the_default_model_stops():
    """`--regex '[0-9]+'` and `{"type": "integer"}` ran SmolLM2 into `10000...0` and `100101010101...`
    until the repetition guard stopped it, exit 1; a bounded length lets the grammar end the answer."""
    found = _default_model_generations()
    assert {flag for flag, _ in found} == {"--regex", "--schema"}, found
    for flag, value in found:
        if flag == "--regex":
            assert not UNBOUNDED.search(value), value
            continue
        schema = json.loads(value)
        if schema.get("type") in ("integer", "number"):
            assert "minimum" in schema and "maximum" in schema, value
