"""Reading constraints from files, stdin and flags into a `ConstraintSpec`.

Everything that can be wrong with the user's input is caught here, with the file and
position, before any backend or model is touched.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import json
import stat
import sys
from pathlib import Path

from sgcli.constraints.jsonpos import locate
from sgcli.constraints.schema_refs import Reference, first_cycle, references
from sgcli.constraints.spec import (
    EXTENSION_KINDS,
    MAX_DEPTH,
    ConstraintSpec,
    JsonOptions,
    Kind,
    json_depth,
    parse_json,
)
from sgcli.errors import Location, UserError, offset_to_line_col
from sgcli.limits import current_limits, deep_call

UTF8_BOM = b"\xef\xbb\xbf"
LIBRARY_DIR = Path(__file__).resolve().parent.parent / "grammars"


def read_text(
    path: str, *, what: str = "file", limit: int | None = None, flag: str = "--max-constraint-bytes"
) -> tuple[str, str]:
    """(text, origin) of a path, or of stdin for '-', bounded as `read_bytes` is. A UTF-8 byte order
    mark (Windows editors write one; RFC 8259 lets a reader ignore it) is dropped."""
    data, origin = read_bytes(path, what=what, limit=limit, flag=flag)
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8"), origin
    except UnicodeDecodeError as exc:
        line, col = _byte_line_col(data, exc.start)
        raise UserError(
            f"{what} is not UTF-8 text", location=Location(origin, line, col), hint="save the file as UTF-8"
        ) from None


def read_bytes(
    path: str, *, what: str = "file", limit: int | None = None, flag: str = "--max-constraint-bytes"
) -> tuple[bytes, str]:
    """(bytes, origin) of a path, or of stdin for '-'; unreadable paths are the user's to fix.

    At most `limit` bytes are read (default: --max-constraint-bytes; 0 = no limit): one byte
    more is exit 2 naming `flag`, so /dev/zero or a 10 GB file fails in milliseconds."""
    limit = current_limits().max_bytes if limit is None else limit
    with open_input(path, what=what) as (stream, origin):
        data = _read(stream, limit + 1 if limit else -1)
    if limit and len(data) > limit:
        raise over_limit(what, origin, limit, flag, size=_size(path))
    return data, origin


def read_lines(path: str, *, what: str, limit: int, flag: str) -> tuple[list[bytes], str]:
    """(lines without their newline, origin) of a path or stdin, read line by line; a line longer than
    `limit` bytes (0 = no limit) is exit 2 at its line number, naming `flag`, and nothing after it
    is read (a file without newlines, like /dev/zero, stops after `limit` + 1 bytes)."""
    lines: list[bytes] = []
    with open_input(path, what=what) as (stream, origin):
        while True:
            line = _readline(stream, limit + 1 if limit else -1)
            if not line:
                return lines, origin
            if line.endswith(b"\n"):
                line = line[:-1]
            elif limit and len(line) > limit:
                raise over_limit(f"this line of the {what}", origin, limit, flag, line=len(lines) + 1)
            lines.append(line)


def over_limit(what: str, origin: str, limit: int, flag: str, *, size: int | None = None, line: int | None = None):
    """The one exit-2 error for input past a size limit: what, where, the limit and the flag that raises it."""
    env = "SGCLI_" + flag.removeprefix("--").replace("-", "_").upper()  # every limit flag reads SGCLI_<FLAG>
    total = f" ({size:,} bytes)" if size else ""
    return UserError(
        f"{what} is over the limit of {limit:,} bytes{total}",
        location=Location(origin, line),
        hint=f"raise the limit with {flag} or {env} (0 turns it off)",
    )


@contextlib.contextmanager
def open_input(path: str, *, what: str = "file"):
    """(binary stream, origin) of a path, or of stdin for '-'; open errors become exit 2 naming the path."""
    if path == "-":
        yield getattr(sys.stdin, "buffer", sys.stdin), "<stdin>"
        return
    p = Path(path).expanduser()
    try:
        stream = p.open("rb")
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}", hint="check the path") from None
    except IsADirectoryError:
        raise UserError(f"{what} is a directory, not a file: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None
    with stream:
        try:
            yield stream, str(path)
        except OSError as exc:  # EISDIR on read, EIO...
            if exc.errno == errno.EISDIR:
                raise UserError(f"{what} is a directory, not a file: {path}") from None
            raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None


def _read(stream, n: int) -> bytes:
    data = stream.read(n)
    return data.encode("utf-8") if isinstance(data, str) else data  # a text-only stdin (embedding, tests)


def _readline(stream, n: int) -> bytes:
    data = stream.readline(n)
    return data.encode("utf-8") if isinstance(data, str) else data


def _size(path: str) -> int | None:
    """The size of a regular file (to say by how much it is over), else None."""
    if path == "-":
        return None
    try:
        st = Path(path).expanduser().stat()
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _byte_line_col(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and byte column of a byte offset."""
    line = data.count(b"\n", 0, offset) + 1
    return line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def kind_from_extension(path: str) -> Kind:
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
        raise UserError(f"no grammar named {name} in the library", hint=hint)
    return str(matches[0])


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


def check_schema(spec: ConstraintSpec) -> ConstraintSpec:
    """Meta-validate a JSON Schema (the error names the offending keyword's position) and its
    references; the spec to use from here on: bundled where its `$ref`s name other files."""
    schema = spec.schema()
    meta_validate(spec, schema)
    return check_refs(spec, schema)


def meta_validate(spec: ConstraintSpec, schema, cls: type | None = None) -> None:
    """The schema (`spec`'s parsed text) is valid under its draft's meta-schema (or `cls`'s: a file
    bundled into a schema of that draft), or exit 2 at the keyword."""
    import jsonschema

    from sgcli.constraints.dialect import dialect_of

    if not isinstance(schema, (dict, bool)):
        raise UserError(
            f"a JSON Schema must be an object or a boolean, not {type(schema).__name__}",
            location=Location(spec.origin, 1, 1),
        )
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is not None and not isinstance(dialect, str):
        raise UserError(
            f"invalid JSON Schema at $schema: {json.dumps(dialect)[:60]} is not a string",
            location=Location(spec.origin, *(locate(spec.text, ("$schema",)) or (None, None))),
            hint='name the draft by its URI, e.g. "https://json-schema.org/draft/2020-12/schema"',
        )
    cls = cls or dialect_of(schema).cls  # a near miss of a draft's URI: that draft; no draft at all: 2020-12
    try:  # jsonschema recurses ~10 frames per schema level; parse_json has bounded the levels
        deep_call(lambda: cls.check_schema(schema), frames=12 * json_depth(schema))
    except jsonschema.SchemaError as exc:
        pos = locate(spec.text, exc.path) or (None, None)
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise UserError(
            f"invalid JSON Schema at {where}: {exc.message}",
            location=Location(spec.origin, *pos),
            hint=f"the schema must be valid under {cls.__name__.removesuffix('Validator')}",
        ) from None


def check_refs(spec: ConstraintSpec, schema) -> ConstraintSpec:
    """Every `$ref` resolves, or exit 2 at its line:col before anything compiles: one that names another
    file is bundled (`schema_bundle`: a file beside the schema, a draft's meta-schema; sgcli fetches
    nothing), a local one must name something, and no reference cycle may apply a schema to itself
    before reaching a value (schema_refs.first_cycle). Returns the spec to use (bundled or as given)."""
    refs = references(schema)
    if any(ref.remote for ref in refs):
        from sgcli.constraints.schema_bundle import bundle

        spec = bundle(spec, schema, refs, _SchemaFiles())
        schema = spec.schema()
        refs = references(schema)

    def at(ref: Reference) -> Location:
        return spec.place(ref.path)

    for ref in refs:
        if ref.remote:
            raise UserError(
                f"{ref.keyword} {ref.ref!r} points outside this file; sgcli does not fetch schemas, so no "
                "backend could enforce it and no check could judge the output",
                location=at(ref),
                hint="copy the schema it names into $defs and refer to it as '#/$defs/NAME'",
            )
        if ref.target is None:
            raise UserError(
                f"{ref.keyword} {ref.ref!r} does not resolve inside the schema",
                location=at(ref),
                hint="check the JSON pointer or anchor after '#'",
            )
    cycle = first_cycle(schema, refs)
    if cycle:
        chain = " -> ".join(repr(r.ref) for r in [*cycle, cycle[0]])
        raise UserError(
            f"$ref cycle {chain} applies a schema to itself before reaching any value: validation never ends "
            "(the JSON Schema specification leaves such schemas undefined)",
            location=at(cycle[0]),
            hint="let the recursion pass through a property or an array item, or drop the reference",
        )
    return spec


class _SchemaFiles:
    """The files a schema's `$ref`s name, read as `--schema FILE` is (`schema_bundle.Reader`)."""

    def read(self, path: str) -> tuple[str, str]:
        return read_text(path, what="JSON Schema file")

    def meta_validate(self, spec: ConstraintSpec, schema, cls: type) -> None:
        meta_validate(spec, schema, cls)


def from_file(path: str, kind: Kind | None = None, json_options: JsonOptions | None = None) -> ConstraintSpec:
    if path.startswith("@"):
        path = resolve_library(path)
    if kind is None:
        kind = kind_from_extension(path)
    text, origin = read_text(path, what=f"{kind.label} file")
    if not text.strip():
        raise UserError(
            f"{kind.label} file {origin} is empty",
            location=Location(origin, 1, 1),
            hint=f"put the {kind.label} text in the file",
        )
    if kind is Kind.REGEX:
        text = text.rstrip("\n")
    return _checked(ConstraintSpec(kind, text, origin, json_options=json_options or JsonOptions()))


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
    """`--schema '{"type": "integer"}'`: the schema itself, as llm and vLLM take it, not a file name."""
    return value.lstrip().startswith("{")


def from_pydantic(target: str, json_options: JsonOptions | None = None) -> ConstraintSpec:
    """`module:Class` (module importable or a .py path) -> its model_json_schema()."""
    if ":" not in target:
        raise UserError(f"--pydantic expects module:Class, got '{target}'", hint="e.g. --pydantic myapp.models:Answer")
    module_name, _, cls_name = target.rpartition(":")
    try:
        if module_name.endswith(".py"):
            spec_ = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
            if spec_ is None or not Path(module_name).is_file():
                raise ImportError(f"no file {module_name}")
            module = importlib.util.module_from_spec(spec_)
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
    text = json.dumps(cls.model_json_schema(), indent=2)
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
        return from_file(structural_tag, Kind.STRUCTURAL_TAG)
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
