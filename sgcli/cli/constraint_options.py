"""The constraint flags every command that takes a grammar shares."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sgcli.constraints.sources import from_flags
from sgcli.constraints.spec import ConstraintSpec, JsonOptions

SchemaOpt = Annotated[
    Optional[str], typer.Option("--schema", help="JSON Schema file ('-' reads stdin).", rich_help_panel="Constraint")
]
PydanticOpt = Annotated[
    Optional[str],
    typer.Option(
        "--pydantic", help="module:Class of a pydantic model (or path.py:Class).", rich_help_panel="Constraint"
    ),
]
RegexOpt = Annotated[
    Optional[str],
    typer.Option("--regex", help="Regular expression the whole output must match.", rich_help_panel="Constraint"),
]
EbnfOpt = Annotated[
    Optional[str],
    typer.Option("--ebnf", help="GBNF / EBNF file (llama.cpp GBNF, root rule: root).", rich_help_panel="Constraint"),
]
LarkOpt = Annotated[
    Optional[str], typer.Option("--lark", help="Lark grammar file (start rule: start).", rich_help_panel="Constraint")
]
ChoiceOpt = Annotated[
    Optional[list[str]],
    typer.Option("--choice", help="An allowed output; repeat for each.", rich_help_panel="Constraint"),
]
GrammarOpt = Annotated[
    Optional[str],
    typer.Option(
        "--grammar",
        help="Grammar file, kind from extension (.json .ebnf .gbnf .lark .regex), or @name from sgcli/grammars/.",
        rich_help_panel="Constraint",
    ),
]
SubOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--sub",
        help="name=FILE: a JSON Schema or Lark sub-grammar the Lark grammar uses as @name; repeatable.",
        rich_help_panel="Constraint",
    ),
]
BackendOpt = Annotated[
    Optional[str],
    typer.Option(
        "--backend",
        "-b",
        envvar="SGCLI_BACKEND",
        help="Grammar backend (`sgcli backends` marks the default); 'auto' tries them in the order "
        "`sgcli backends` shows and says what a fallback weakens; 'none' = unconstrained.",
        show_default=False,
    ),
]
ThreadsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        envvar="SGCLI_THREADS",
        help="CPU threads for the model (default 1: measured fastest for small models on a shared 2-core machine).",
        rich_help_panel="Model",
    ),
]
StructuralTagOpt = Annotated[
    Optional[str],
    typer.Option("--structural-tag", help="Structural tag JSON file (tool calls).", rich_help_panel="Constraint"),
]

JsonWhitespaceOpt = Annotated[
    str,
    typer.Option(
        "--json-whitespace", help="flexible (any whitespace) or compact (none).", rich_help_panel="JSON layout"
    ),
]
WhitespacePatternOpt = Annotated[
    Optional[str],
    typer.Option(
        "--whitespace-pattern", help="Regex for whitespace between JSON tokens.", rich_help_panel="JSON layout"
    ),
]
IndentOpt = Annotated[
    Optional[int], typer.Option("--indent", help="Pretty-print JSON with this indent.", rich_help_panel="JSON layout")
]
MaxWhitespaceOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-whitespace", help="At most N whitespace chars between JSON tokens.", rich_help_panel="JSON layout"
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict-properties", help="Forbid object properties the schema does not list.", rich_help_panel="JSON layout"
    ),
]


def json_options(
    whitespace: str, pattern: str | None, indent: int | None, max_ws: int | None, strict: bool
) -> JsonOptions:
    from sgcli.errors import UserError

    if whitespace not in ("flexible", "compact"):
        raise UserError(f"--json-whitespace must be flexible or compact, not '{whitespace}'")
    if indent is not None and indent < 0:
        raise UserError("--indent must be 0 or more")
    if max_ws is not None and max_ws < 1:
        raise UserError("--max-whitespace must be 1 or more")
    return JsonOptions(whitespace, pattern, indent, max_ws, strict)


def build_spec(
    *,
    schema,
    pydantic,
    regex,
    ebnf,
    lark,
    choice,
    grammar,
    structural_tag,
    json_whitespace="flexible",
    whitespace_pattern=None,
    indent=None,
    max_whitespace=None,
    strict_properties=False,
    required=True,
) -> ConstraintSpec:
    opts = json_options(json_whitespace, whitespace_pattern, indent, max_whitespace, strict_properties)
    return from_flags(
        schema=schema,
        pydantic=pydantic,
        regex=regex,
        ebnf=ebnf,
        lark=lark,
        choice=choice,
        grammar=grammar,
        structural_tag=structural_tag,
        json_options=opts,
        required=required,
    )
