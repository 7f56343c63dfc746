"""Option values checked without pydantic (sgcli.cli.coercion) come out as typer's adapters make them."""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Optional

import pytest
import typer
from typer.testing import CliRunner


def _shout(value: str) -> str:
    """A parser that words its own usage error, and lets a ValueError through for typer to word."""
    if value == "bad":
        raise typer.BadParameter("no bad values")
    if value == "odd":
        raise ValueError("odd is not allowed")
    return value.upper()


class Colour(str, Enum):
    red = "red"
    blue = "blue"


def _app(cls):
    app = typer.Typer()

    @app.command(cls=cls)
    def show(
        names: Annotated[Optional[list[str]], typer.Argument()] = None,
        word: Annotated[str, typer.Option()] = "w",
        count: Annotated[int, typer.Option()] = 3,
        ratio: Annotated[float, typer.Option()] = 0.5,
        bounded: Annotated[int, typer.Option(min=0, max=5)] = 1,
        maybe: Annotated[Optional[int], typer.Option()] = None,
        colour: Annotated[Colour, typer.Option()] = Colour.red,
        tags: Annotated[Optional[list[str]], typer.Option()] = None,
        flag: Annotated[bool, typer.Option()] = False,
        loud: Annotated[str, typer.Option(parser=_shout)] = "quiet",
        louds: Annotated[Optional[list[str]], typer.Option(parser=_shout)] = None,
    ) -> None:
        values = [names, word, count, ratio, bounded, maybe, colour, tags, flag, loud, louds]
        typer.echo(repr([(type(v).__name__, v) for v in values]))

    @app.command()
    def other() -> None:  # two commands: `show` stays a subcommand
        pass

    return app


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["a", "b"],
        ["--word", "x", "--count", "7", "--ratio", "2", "--maybe", "4", "--tags", "p", "--tags", "q"],
        ["--colour", "blue", "--flag"],
        ["--count", "seven"],
        ["--ratio", "nan"],
        ["--bounded", "9"],
        ["--loud", "hey", "--louds", "a", "--louds", "b"],
        ["--loud", "bad"],
        ["--loud", "odd"],
        ["--louds", "odd"],
    ],
)
def test_values_and_errors_are_typers(args):
    from sgcli.cli.coercion import Command

    plain = CliRunner().invoke(_app(None), ["show", *args])
    deferred = CliRunner().invoke(_app(Command), ["show", *args])
    assert (deferred.exit_code, deferred.output) == (plain.exit_code, plain.output)


@pytest.mark.parametrize(("value", "closest"), [("green", None), ("rde", "red"), ("bleu", "blue")])
def test_a_choice_typo_is_one_plain_message_with_the_closest_choice(value, closest):
    """Not pydantic's "Value error, ..." wording: the choices, and a did-you-mean where one is close."""
    from sgcli.cli.coercion import Command

    plain = CliRunner().invoke(_app(None), ["show", "--colour", value])
    ours = CliRunner().invoke(_app(Command), ["show", "--colour", value])
    assert ours.exit_code == plain.exit_code == 2
    flat = " ".join(re.sub("[\u2500-\u257f]", " ", ours.output).split())  # rich's box and wraps removed
    assert f"'{value}' is not one of 'red', 'blue'." in flat and "Value error" not in flat
    assert ("Did you mean" in flat) is (closest is not None)
    if closest:
        assert f"Did you mean '{closest}'?" in flat


def _flat(text: str) -> str:
    return " ".join(re.sub("[\u2500-\u257f]", " ", text).split())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["generate", "--dtype", "fp16", "--regex", "a", "x"], "Did you mean 'float16'?"),
        (["convert", "g.gbnf", "--to", "larkk"], "'larkk' is not one of 'lark', 'gbnf', 'ebnf'. Did you mean 'lark'?"),
        (["cache", "clear", "kernal"], "no cache section named kernal in"),
        (["generate", "--grammar", "@jsn", "x"], "no grammar named @jsn in the library. Did you mean '@json'?"),
        (["rule", "J0001"], "no rule J0001. Did you mean 'J001'?"),
        (["lint", "g.gbnf", "--json-whitespace", "compat"], "'compat' is not one of 'compact', 'flexible'."),
        (["lint", "g.gbnf", "--kind", "gbfn"], "not a kind of file sgcli can lint. Did you mean 'gbnf'?"),
        (["compile", "g.gbnf", "--kind", "lrak"], "unknown grammar kind 'lrak'. Did you mean 'lark'?"),
        (["compile", "g.gbnf", "-b", "xgr"], "Did you mean 'xgrammar'?"),  # the start of one name only
    ],
)
def test_a_misspelt_value_gets_a_did_you_mean(run_cli, tmp_path, monkeypatch, args, expected):
    (tmp_path / "g.gbnf").write_text('root ::= "a"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "models").mkdir(parents=True)
    result = run_cli(*args)
    assert result.exit_code == 2, result.output
    assert expected in _flat(result.stderr)
    if args[0] == "cache":
        assert "Did you mean 'kernels'?" in result.stderr


def test_choice_flags_show_their_choices_and_to_takes_any_case(run_cli, tmp_path, monkeypatch):
    for command, flag, shown in (("lint", "--json-whitespace", "<compact|flexible>"), ("convert", "--to", "lark|gbnf")):
        assert shown in _flat(run_cli(command, "--help").stdout), flag
    (tmp_path / "g.gbnf").write_text('root ::= "a"\n')
    monkeypatch.chdir(tmp_path)
    result = run_cli("convert", "g.gbnf", "--to", "LARK", "--no-check")
    assert result.exit_code == 0 and result.stdout.startswith("start:"), result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--input", "a.jsonl", "--input", "b.jsonl"], "--input: given twice ('a.jsonl', then 'b.jsonl')"),
        (["--input", "a.jsonl", "-o", "r1.jsonl", "--output=r2.jsonl"], "--output: given twice ('r1.jsonl', then 'r2"),
    ],
)
def test_an_option_of_one_value_given_twice_is_exit_2(run_cli, tmp_path, monkeypatch, args, says):
    """click kept the last value: `--input a.jsonl --input b.jsonl` answered b's lines only and dropped
    a's without a word (a tour). Given twice with one value, or a repeatable option, is fine."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text('{"prompt": "x"}\n')
    result = run_cli("generate", "--regex", "a", *args)
    assert result.exit_code == 2 and says in " ".join(result.output.replace("│", " ").split()), result.output
    same = run_cli("compile", "--regex", "a", "--backend", "llguidance", "--backend", "llguidance")
    assert same.exit_code == 0, same.output
