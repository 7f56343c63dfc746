"""Reading constraints from files, stdin and flags into a `ConstraintSpec`.

Everything that can be wrong with the user's input is caught here, with the file and
position, before any backend or model is touched: files are read bounded (`reading.py`), a JSON
Schema is checked by `schema_input.py`, grammars for their nesting here.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

from sgcli.constraints.reading import read_text, stdin_closed
from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.spec import (
    EXTENSION_KINDS,
    MAX_DEPTH,
    ConstraintSpec,
    JsonOptions,
    Kind,
    parse_json,
)
from sgcli.errors import Location, UserError, did_you_mean, offset_to_line_col

LIBRARY_DIR = Path(__file__).resolve().parent.parent / "grammars"


def kind_from_extension(path: str) -> Kind:
    if path == "-":  # stdin has no extension: its kind is named, or the stream was never there
        if sys.stdin is None:
            raise stdin_closed("grammar")
        raise UserError(
            "cannot tell the grammar kind of '-' (stdin): it has no extension",
            hint="name it with --kind (json_schema, regex, ebnf, lark), or read it with the explicit flag "
            "(--schema -, --ebnf -, --lark -, --regex -)",
        )
    name = Path(path).name.lower()
    for ext in sorted(EXTENSION_KINDS, key=len, reverse=True):  # ".llg.json" before ".json"
        if name.endswith(ext):
            return EXTENSION_KINDS[ext]
    suffix = Path(path).suffix.lower()
    known = ", ".join(sorted(EXTENSION_KINDS))
    raise UserError(
        f"cannot tell the grammar kind of {path} from its extension '{suffix or '(none)'}'",
        hint=f"use one of {known}, or the explicit flag (--schema, --ebnf, --lark, --regex)",
    )


def resolve_library(name: str) -> str:
    """`@json` -> path of sgcli/grammars/json.* in the curated library; only plain names, never a path or glob."""
    stem = name[1:]
    known = sorted({p.name.split(".")[0] for p in LIBRARY_DIR.iterdir() if _library_kind(p)})
    hint = "available: " + ", ".join("@" + k for k in known)
    if not stem.replace("_", "").replace("-", "").isalnum() or not stem.isascii():
        raise UserError(f"{name} is not a library grammar name (letters, digits, '-' and '_' only)", hint=hint)
    matches = sorted(p for p in LIBRARY_DIR.iterdir() if p.name.split(".")[0] == stem and _library_kind(p))
    if not matches:
        raise UserError(
            f"no grammar named {name} in the library." + did_you_mean(name, ["@" + k for k in known]), hint=hint
        )
    return str(matches[0])


def resolve_library_tests(name: str) -> str:
    """`@csv` -> sgcli/grammars/csv.test.yaml, the test file of a library grammar (`sgcli test @csv`,
    where an installed sgcli's grammars are in site-packages)."""
    grammar = Path(resolve_library(name))
    tests = grammar.with_name(grammar.name.split(".")[0] + ".test.yaml")
    if not tests.is_file():
        raise UserError(f"the library grammar {name} has no test file", hint=f"its grammar is {grammar}")
    return str(tests)


def _library_kind(path: Path) -> bool:
    """A grammar file of the library (not its .test.yaml)."""
    return path.is_file() and any(path.name.endswith(ext) for ext in EXTENSION_KINDS) and ".test." not in path.name


_GROUPS = {
    # kind -> (what is skipped: escapes, strings, classes; what opens/closes a level)
    Kind.REGEX: (r"\\.|\[(?:[^\]\\]|\\.)*\]", "(", ")"),
    Kind.EBNF: (r'\\.|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', "(", ")"),
    Kind.LARK: (r'\\.|"(?:[^"\\]|\\.)*"', "([", ")]"),
}


def check_nesting(spec: ConstraintSpec) -> None:
    """Grammars and regexes nested past MAX_DEPTH groups are refused at the first deep group:
    every parser of them (lint's, the backends') recurses once per level."""
    import re

    if spec.kind not in _GROUPS:
        return
    skip, opens, closes = _GROUPS[spec.kind]
    depth = 0
    for m in re.finditer(f"{skip}|[{re.escape(opens + closes)}]", spec.text):
        token = m.group()
        if token in opens:
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(
                    f"{spec.kind.label} nested more than {MAX_DEPTH} groups deep (sgcli's depth limit)",
                    location=Location(spec.origin, *offset_to_line_col(spec.text, m.start())),
                    hint="give inner parts names of their own (rules), or flatten the nesting",
                )
        elif token in closes:
            depth -= 1


def sniffed_kind(kind: Kind, text: str) -> Kind:
    """A `.json` file that is a structural tag (`{"type": "structural_tag", ...}`), read as one: read as a
    JSON Schema it was "'structural_tag' is not a JSON Schema type" with no word of --structural-tag."""
    if kind is not Kind.JSON_SCHEMA or '"structural_tag"' not in text:
        return kind
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return kind
    return Kind.STRUCTURAL_TAG if isinstance(doc, dict) and doc.get("type") == "structural_tag" else kind


def from_file(path: str, kind: Kind | None = None, json_options: JsonOptions | None = None) -> ConstraintSpec:
    if path.startswith("@"):
        path = resolve_library(path)
    sniff = kind is None
    if kind is None:
        kind = kind_from_extension(path)
    text, origin = read_text(path, what=f"{kind.label} file")
    kind = sniffed_kind(kind, text) if sniff else kind
    if not text.strip():
        raise UserError(
            f"{kind.label} file {origin} is empty",
            location=Location(origin, 1, 1),
            hint=f"put the {kind.label} text in the file",
        )
    if kind is Kind.REGEX:  # the file's final line endings are not the pattern's; "\r\n" (Windows) too
        text = text.rstrip("\r\n")
    return _checked(spec_from_text(kind, text, origin, json_options, at=Location(origin, 1, 1)))


def spec_from_text(
    kind: Kind, text: str, origin: str | None, json_options: JsonOptions | None = None, *, at: Location | None = None
) -> ConstraintSpec:
    """A spec of `kind` from the text a file, a test file or a bench line gives: a choice's text lists its
    choices one a line (`choice_spec`); `at` is where the text starts, for a choice's errors."""
    if kind is Kind.CHOICE:
        return choice_spec(text, origin, at=at)
    return ConstraintSpec(kind, text, origin, json_options=json_options or JsonOptions())


def choice_spec(text: str, origin: str | None, *, at: Location | None = None) -> ConstraintSpec:
    """A choice constraint from text: one choice a line, as `--choice` takes one a flag (a final newline
    ends the last choice; "\\r\\n" counts as one). No choice, or an empty line, is exit 2: the spec
    without its `choices` meant the empty string."""
    at = at or Location(origin)
    choices = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    if not choices or choices == [""]:
        raise UserError("the choice grammar lists no choices", location=at, hint="write one choice a line")
    for n, choice in enumerate(choices):
        if choice == "":
            where = Location(at.path, at.line + n, 1) if at.line is not None and at.col == 1 else at
            raise UserError(
                f"choice {n + 1} is an empty line", location=where, hint="write one non-empty choice a line"
            )
    return ConstraintSpec(Kind.CHOICE, "\n".join(choices), origin, choices=tuple(choices))


def _checked(spec: ConstraintSpec) -> ConstraintSpec:
    """The checks every constraint text gets, from a file or a flag: size, nesting, the schema itself."""
    from sgcli.constraints.spec import check_size  # --max-constraint-bytes, before any parse

    check_size(spec)
    check_nesting(spec)
    if spec.kind is Kind.JSON_SCHEMA:
        spec = check_schema(spec)
    if spec.kind is Kind.STRUCTURAL_TAG:
        parse_json(spec.text, spec.origin)
    return spec


def is_inline_schema(value: str) -> bool:
    """`--schema '{"type": "integer"}'`: the schema itself, as llm and vLLM take it, not a file name; so is
    JSON that no schema is (`[1]`, refused as such, where it had been "file not found: [1]"), and `true` or
    `false` where no file has that name."""
    text = value.strip()
    return text.startswith(("{", "[")) or (text in ("true", "false") and not Path(value).exists())


def from_pydantic(target: str, json_options: JsonOptions | None = None) -> ConstraintSpec:
    """`module:Class` (module importable or a .py path) -> its model_json_schema()."""
    if ":" not in target:
        raise UserError(f"--pydantic expects module:Class, got '{target}'", hint="e.g. --pydantic myapp.models:Answer")
    module_name, _, cls_name = target.rpartition(":")
    try:
        if module_name.endswith(".py"):
            # registered as a module of its own name: pydantic resolves a model's string annotations (`from
            # __future__ import annotations`) in sys.modules[cls.__module__], where an unregistered one was missing
            name = f"sgcli_models_{Path(module_name).stem}"  # never a real module's name (`json.py` is not json)
            spec_ = importlib.util.spec_from_file_location(name, module_name)
            if spec_ is None or not Path(module_name).is_file():
                raise ImportError(f"no file {module_name}")
            module = importlib.util.module_from_spec(spec_)
            sys.modules[name] = module
            spec_.loader.exec_module(module)
        else:
            sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(
            f"cannot import {module_name}: {exc}", hint="run from the folder holding the module, or pass a .py path"
        ) from None
    except Exception as exc:
        raise UserError(f"importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not hasattr(cls, "model_json_schema"):
        raise UserError(f"{target} is not a pydantic model class", hint="it must have model_json_schema()")
    try:
        text = json.dumps(cls.model_json_schema(), indent=2)
    except Exception as exc:  # pydantic's own refusal (an undefined annotation, a type with no schema)
        raise UserError(
            f"{target}: pydantic cannot build its JSON Schema: {type(exc).__name__}: {exc}",
            hint="check the model with `python -c 'import ...; print(Model.model_json_schema())'`",
        ) from None
    spec = ConstraintSpec(Kind.JSON_SCHEMA, text, target, json_options=json_options or JsonOptions())
    return check_schema(spec)


def from_flags(
    *,
    schema: str | None = None,
    pydantic: str | None = None,
    regex: str | None = None,
    ebnf: str | None = None,
    lark: str | None = None,
    choice: list[str] | None = None,
    grammar: str | None = None,
    structural_tag: str | None = None,
    json_options: JsonOptions | None = None,
    required: bool = True,
) -> ConstraintSpec:
    """Exactly one constraint flag -> a spec. Two flags, or none when required: exit 2."""
    given = {
        "--schema": schema,
        "--pydantic": pydantic,
        "--regex": regex,
        "--ebnf": ebnf,
        "--lark": lark,
        "--choice": choice or None,
        "--grammar": grammar,
        "--structural-tag": structural_tag,
    }
    present = [flag for flag, value in given.items() if value is not None]
    if len(present) > 1:
        raise UserError(
            f"{present[0]} and {present[1]} both given; a generation takes exactly one constraint",
            hint="keep one of " + ", ".join(present),
        )
    if not present:
        if required:
            raise UserError(
                "no constraint given",
                hint="pass one of --schema, --pydantic, --regex, --ebnf, --lark, --choice, --grammar, --structural-tag "
                "(or --backend none for free text)",
            )
        return ConstraintSpec(Kind.NONE, "", None)
    opts = json_options or JsonOptions()
    flag = present[0]
    if flag == "--schema":
        if not schema.strip():
            raise UserError(
                "--schema is empty", hint="""give a file, - for stdin, or the schema: --schema '{"type": "integer"}'"""
            )
        if is_inline_schema(schema):
            return _checked(ConstraintSpec(Kind.JSON_SCHEMA, schema, "--schema", json_options=opts))
        return from_file(schema, Kind.JSON_SCHEMA, opts)
    if flag == "--pydantic":
        return from_pydantic(pydantic, opts)
    if flag == "--regex":
        if regex == "":
            raise UserError("--regex is empty", hint="give a pattern, e.g. --regex '(yes|no)'")
        spec = ConstraintSpec(Kind.REGEX, regex, "--regex")
        check_nesting(spec)
        return spec
    if flag == "--ebnf":
        return from_file(ebnf, Kind.EBNF)
    if flag == "--lark":
        return from_file(lark, Kind.LARK, opts)
    if flag == "--structural-tag":
        return from_file(structural_tag, Kind.STRUCTURAL_TAG, opts)
    if flag == "--choice":
        if any(c == "" for c in choice):
            raise UserError("--choice values must not be empty")
        return ConstraintSpec(Kind.CHOICE, "\n".join(choice), "--choice", choices=tuple(choice))
    return from_file(grammar, None, opts)


def with_subgrammars(spec: ConstraintSpec, subs: list[str]) -> ConstraintSpec:
    """Attach `--sub name=file` sub-grammars (JSON Schema or Lark) that a Lark grammar refers to as `@name`."""
    import dataclasses

    if not subs:
        return spec
    if spec.kind is not Kind.LARK:
        raise UserError(
            f"--sub needs a Lark grammar (--lark), not {spec.kind.label}",
            hint="write the top grammar in Lark and refer to each sub-grammar as @name",
        )
    parsed = []
    for item in subs:
        name, sep, path = item.partition("=")
        if not sep or not name or not path or not name.replace("_", "").isalnum():
            raise UserError(f"--sub expects name=file, got '{item}'", hint="e.g. --sub myobj=answer.schema.json")
        if f"@{name}" not in spec.text:
            raise UserError(
                f"--sub {name}: the grammar never refers to @{name}",
                location=Location(spec.origin),
                hint=f"use @{name} in the Lark grammar, or drop this --sub",
            )
        sub = from_file(path, None, spec.json_options)
        if sub.kind not in (Kind.JSON_SCHEMA, Kind.LARK):
            raise UserError(f"--sub {name}: sub-grammars must be JSON Schema or Lark, not {sub.kind.label}")
        parsed.append((name, sub))
    return dataclasses.replace(spec, subgrammars=tuple(parsed))
