"""The constraint flags every command that takes a grammar shares."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, ClassVar, Optional

import typer

from sgcli.cli.backend_options import BackendOpt  # noqa: F401  (one --backend: commands use co.BackendOpt)
from sgcli.cli.coercion import plain
from sgcli.cli.common import TOKENIZER_HELP
from sgcli.cli.flag_groups import takes
from sgcli.constraints.sources import from_file, from_flags, kind_from_extension, resolve_library, with_subgrammars
from sgcli.constraints.spec import GENERATE_WHITESPACE, ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError

SchemaOpt = Annotated[
    Optional[str],
    typer.Option(
        "--schema",
        help="JSON Schema: a file, '-' (stdin), or the schema itself ('{\"type\": \"integer\"}').",
        rich_help_panel="Constraint",
    ),
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
TokenizerOpt = Annotated[
    Optional[str],
    typer.Option("--tokenizer", help=TOKENIZER_HELP + " Without it: the embedded SmolLM2's."),
]
StructuralTagOpt = Annotated[
    Optional[str],
    typer.Option("--structural-tag", help="Structural tag JSON file (tool calls).", rich_help_panel="Constraint"),
]

JsonWhitespace = Enum("JsonWhitespace", {n: n for n in ("compact", "flexible")}, type=str)  # help, completion

JsonWhitespaceOpt = Annotated[
    Optional[JsonWhitespace],
    typer.Option(
        "--json-whitespace",
        envvar="SGCLI_JSON_WHITESPACE",
        callback=plain,
        help="compact (no whitespace between JSON tokens) or flexible (any, without bound). Default: compact where "
        "the command generates or compiles for generate; flexible in masks and test, which check given texts.",
        rich_help_panel="JSON layout",
    ),
]
WhitespacePatternOpt = Annotated[
    Optional[str],
    typer.Option(
        "--whitespace-pattern",
        help="Regex for the whitespace between JSON tokens: each gap is empty or one match, on every backend.",
        rich_help_panel="JSON layout",
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
AllowUnenforcedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unenforced",
        help="Go on where a JSON Schema keyword is enforced neither by the backend's grammar nor by sgcli's "
        "schema checker (an unknown format), or, on a server (--engine), where the checker cannot judge it in "
        "the answer; the record lists each under `unenforced`. Without it that is exit 2, before the model "
        "loads or any request goes out.",
        rich_help_panel="Constraint",
    ),
]


@dataclass
class ConstraintFlags:
    """The constraint flags as given; every command turns them into specs the same way."""

    schema: str | None = None
    pydantic: str | None = None
    regex: str | None = None
    ebnf: str | None = None
    lark: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    structural_tag: str | None = None
    sub: list[str] | None = None
    takes_subs: ClassVar[bool] = True  # False for a command without --sub (convert): no "pass --sub" advice
    json_whitespace: str | None = None  # None: not given (see `default_whitespace`)
    whitespace_pattern: str | None = None
    indent: int | None = None
    max_whitespace: int | None = None
    strict_properties: bool = False
    # Not a flag: the whitespace when no layout flag says (flexible: the schema's whole language, for
    # commands that judge given texts; GenerationConstraintFlags: what generate compiles).
    default_whitespace: str = "flexible"
    allow_unenforced: bool = False

    def layout(self) -> JsonOptions:
        """The JSON layout; contradictory flags are exit 2 here (JsonOptions checks them). Without
        --json-whitespace: flexible under --indent, --max-whitespace or --whitespace-pattern (the base they
        bound), else `default_whitespace`."""
        whitespace = self.json_whitespace
        if whitespace is None:
            bounded = (self.whitespace_pattern, self.indent, self.max_whitespace) != (None, None, None)
            whitespace = "flexible" if bounded else self.default_whitespace
        return JsonOptions(
            whitespace, self.whitespace_pattern, self.indent, self.max_whitespace, self.strict_properties
        )

    def for_server(self) -> None:
        """A serving engine lays JSON out as it was started to: ask it only for the layout flags given."""
        self.default_whitespace = "flexible"

    def given(self) -> bool:
        kinds = (self.schema, self.pydantic, self.regex, self.ebnf, self.lark, self.choice, self.grammar)
        return any(v is not None for v in (*kinds, self.structural_tag))

    def one_stdin(self, others: dict[str, str | None]) -> None:
        """Stdin can be read once: two inputs given as '-' (a constraint flag or `others`: a grammar
        argument, --text, --input, the prompt) are exit 2 before either is read (the second would see
        nothing, or the first would swallow the other's text)."""
        files = ("schema", "ebnf", "lark", "grammar", "structural_tag")  # the constraint flags that name a file
        given = others | {f"--{name.replace('_', '-')}": getattr(self, name) for name in files}
        readers = [name for name, value in given.items() if value == "-"]
        if len(readers) > 1:
            raise UserError(
                f"{' and '.join(readers)} are '-': only one input can come from stdin", hint="put the others in files"
            )

    def spec(self, *, required: bool = True) -> ConstraintSpec:
        """The one constraint the kind flags name, with the layout and `--sub` sub-grammars."""
        return self._ready([self._flag_spec(required)])[0]

    def _flag_spec(self, required: bool) -> ConstraintSpec:
        spec = from_flags(
            schema=self.schema,
            pydantic=self.pydantic,
            regex=self.regex,
            ebnf=self.ebnf,
            lark=self.lark,
            choice=self.choice,
            grammar=self.grammar,
            structural_tag=self.structural_tag,
            json_options=self.layout(),
            required=required,
        )
        return with_subgrammars(spec, self.sub or [])

    def file_spec(self, path: str, kind: Kind | None = None) -> ConstraintSpec:
        """A grammar FILE argument (or @name) read as the kind flags would read it."""
        return self._ready([self._file_spec(path, kind)])[0]

    def _file_spec(self, path: str, kind: Kind | None) -> ConstraintSpec:
        return with_subgrammars(from_file(path, kind, self.layout()), self.sub or [])

    def apply(self, spec: ConstraintSpec) -> ConstraintSpec:
        """A spec read elsewhere (a test file's grammar) with these flags' layout and sub-grammars."""
        import dataclasses

        spec = with_subgrammars(dataclasses.replace(spec, json_options=self.layout()), self.sub or [])
        return self._ready([spec])[0]

    def specs(self, files: list[str] | None, kind: Kind | None = None) -> list[ConstraintSpec | BadInput]:
        """FILE arguments and/or one constraint flag -> specs, checked as `_ready` checks them. A file that
        cannot be read or is not valid is a `BadInput` in its place, so it never hides the other files'
        results; no grammar at all, a bad flag, or a layout flag nothing takes is exit 2."""
        from sgcli.dialects.embedded import check_embedded

        layout = self.layout()  # a flag's mistake is the run's exit 2, not each file's
        read = [self._file_or_bad(f, kind, layout) for f in files or []]
        if self.given():
            read.append(self._flag_spec(required=True))
            check_embedded(read[-1], subs_taken=self.takes_subs)
        if not read:
            raise no_grammar()
        self._layout_used([s for s in read if not isinstance(s, BadInput)])
        return read

    def _file_or_bad(self, path: str, kind: Kind | None, layout: JsonOptions) -> ConstraintSpec | BadInput:
        """The file's spec, or its own error as a `BadInput` (a --sub mistake stays the run's exit 2)."""
        from sgcli.dialects.embedded import check_embedded

        try:
            spec = from_file(path, kind, layout)
        except UserError as exc:
            return BadInput(path, kind or _kind_or_none(path), exc)
        spec = with_subgrammars(spec, self.sub or [])
        try:
            check_embedded(spec, subs_taken=self.takes_subs)
        except UserError as exc:
            return BadInput(path, spec.kind, exc)
        return spec

    def _ready(self, specs: list[ConstraintSpec]) -> list[ConstraintSpec]:
        """`specs`, checked before anything loads: each schema written inside a grammar or tag is valid JSON
        Schema (exit 2 at its keyword), and `_layout_used`."""
        from sgcli.dialects.embedded import check_embedded

        for spec in specs:
            check_embedded(spec, subs_taken=self.takes_subs)
        self._layout_used(specs)
        return specs

    def _layout_used(self, specs: list[ConstraintSpec]) -> None:
        """A layout flag was not given where none of `specs` has JSON for it to shape: a flag that would
        change nothing is exit 2, never ignored. (--json-whitespace is left out: sgcli.toml and
        SGCLI_JSON_WHITESPACE set it for every command, whatever the grammar.)"""
        from sgcli.dialects.embedded import embedded_schemas  # an inline %json is JSON to lay out too

        given = [
            flag
            for flag, on in (
                ("--whitespace-pattern", self.whitespace_pattern is not None),
                ("--indent", self.indent is not None),
                ("--max-whitespace", self.max_whitespace is not None),
                ("--strict-properties", self.strict_properties),
            )
            if on
        ]
        if given and specs and not any(s.takes_json_layout() or embedded_schemas(s) for s in specs):
            first = specs[0]
            raise _nothing_to_shape(given, first)


@dataclass(frozen=True)
class BadInput:
    """A FILE argument that could not be read as a constraint (unreadable, not valid): its exit-2 error,
    kept for the file's own report while the files after it still run. `kind`: None where not known."""

    path: str
    kind: Kind | None
    error: UserError


def _kind_or_none(path: str) -> Kind | None:
    try:
        return kind_from_extension(resolve_library(path) if path.startswith("@") else path)
    except UserError:
        return None


def _nothing_to_shape(given: list[str], spec: ConstraintSpec) -> UserError:
    """The refusal of layout flags `given` for `spec`, which has no JSON, each flag with its own why:
    --strict-properties said "its own text decides its whitespace", which is no reason for a property rule."""
    layout = [flag for flag in given if flag != "--strict-properties"]
    whys = ["has no JSON to lay out; its own text decides its whitespace"] if layout else []
    if "--strict-properties" in given:
        whys.append(
            "has no JSON object for --strict-properties to close (the flag shapes JSON objects: no property "
            "beyond those the schema lists)"
        )
    drop = "drop the flags" if len(given) > 1 else "drop the flag"
    takers = "a JSON Schema, a structural tag or a Lark grammar's --sub and %json schemas take it"
    return UserError(
        f"{', '.join(given)}: {spec.name} ({spec.kind.label}) " + ", and ".join(whys),
        hint=drop + (", or write the layout into the grammar" if layout else "") + f" ({takers})",
    )


@dataclass
class GenerationConstraintFlags(ConstraintFlags):
    """The constraint flags of a command that generates, or compiles, lints or converts what generate
    would: without a layout flag, JSON is compact (GENERATE_WHITESPACE), so a model cannot emit
    whitespace until --max-tokens."""

    default_whitespace: str = GENERATE_WHITESPACE


def no_grammar() -> UserError:
    return UserError(
        "no grammar given",
        hint="pass FILE arguments or one of --schema, --pydantic, --regex, --ebnf, --lark, --choice, --grammar, "
        "--structural-tag",
    )


# name -> (option declaration, default): the parameters `takes_constraint` adds to a command.
_KIND_FLAGS = {
    "schema": (SchemaOpt, None),
    "pydantic": (PydanticOpt, None),
    "regex": (RegexOpt, None),
    "ebnf": (EbnfOpt, None),
    "lark": (LarkOpt, None),
    "choice": (ChoiceOpt, None),
    "grammar": (GrammarOpt, None),
    "structural_tag": (StructuralTagOpt, None),
}
_LAYOUT_FLAGS = {
    "sub": (SubOpt, None),
    "json_whitespace": (JsonWhitespaceOpt, None),
    "whitespace_pattern": (WhitespacePatternOpt, None),
    "indent": (IndentOpt, None),
    "max_whitespace": (MaxWhitespaceOpt, None),
    "strict_properties": (StrictOpt, False),
}


_GUARANTEE_FLAGS = {"allow_unenforced": (AllowUnenforcedOpt, False)}


def takes_constraint(*, kinds: bool = True, generates: bool = True, guarantee: bool = False, subgrammars: bool = True):
    """Give a command the constraint flags without declaring them again, gathered into one
    `flags: ConstraintFlags` (`sgcli.cli.flag_groups.takes`). `kinds=False`: only --sub and the
    JSON-layout flags (for commands whose grammar comes from elsewhere, like a test file).
    `generates=False`: a command that judges given texts, whose JSON is flexible unless a flag says.
    `guarantee`: also --allow-unenforced (commands that compile for generating). `subgrammars=False`:
    no --sub (a command whose grammar cannot hold @name sub-grammars, like a conversion's)."""
    cls = GenerationConstraintFlags if generates else ConstraintFlags
    if not subgrammars:
        cls = type(cls.__name__, (cls,), {"takes_subs": False})
    layout = _LAYOUT_FLAGS if subgrammars else {k: v for k, v in _LAYOUT_FLAGS.items() if k != "sub"}
    return takes("flags", cls, {**(_KIND_FLAGS if kinds else {}), **layout, **(_GUARANTEE_FLAGS if guarantee else {})})
