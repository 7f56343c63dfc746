"""Diagnostics as text: concise, full (with the source line and a caret), json,
json-lines, and GitHub Actions workflow commands."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.errors import plural
from sgcli.lint.diagnostic import Diagnostic
from sgcli.lint.rules import RULES

# ruff's names; text and jsonl are the spellings of concise and json-lines every command takes.
FORMATS = ("concise", "full", "json", "json-lines", "github", "sarif", "text", "jsonl")


def location(d: Diagnostic) -> str:
    parts = [d.path]
    if d.line is not None:
        parts.append(str(d.line))
        if d.col is not None:
            parts.append(str(d.col))
    return ":".join(parts)


def concise(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    return "".join(f"{location(d)}: {d.code} {d.message}\n" for d in diags)


def full(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    blocks = []
    for d in diags:
        lines = [f"{location(d)}: {d.code} [{d.severity}] {d.message}"]
        lines += _excerpt(d, sources.get(d.path))
        if d.hint:
            lines.append(f"  = hint: {d.hint}")
        lines += [f"  = note: {n}" for n in d.notes]
        if d.backend:
            lines.append(f"  = backend: {d.backend}")
        lines.append(f"  = rule: {d.name} (sgcli rule {d.code})")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _excerpt(d: Diagnostic, text: str | None) -> list[str]:
    if text is None or d.line is None:
        return []
    source_lines = text.split("\n")
    if d.line > len(source_lines):
        return []
    src = source_lines[d.line - 1].rstrip("\r")
    col = d.col or 1
    if d.end_line == d.line and d.end_col is not None and d.end_col > col:
        width = d.end_col - col
    elif d.end_line is not None and d.end_line > d.line:
        width = max(1, len(src) - col + 1)
    else:
        width = 1
    gutter = " " * len(str(d.line))
    prefix = "".join(ch if ch == "\t" else " " for ch in src[: col - 1])
    return [f"{gutter} |", f"{d.line} | {src}", f"{gutter} | {prefix}{'^' * width}"]


def as_json(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    return json.dumps([d.as_dict() for d in diags], indent=2, ensure_ascii=False) + "\n"


def json_lines(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    return "".join(json.dumps(d.as_dict(), ensure_ascii=False) + "\n" for d in diags)


def _gh_escape(value: str, *, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def github(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    out = []
    for d in diags:
        level = "error" if d.severity == "error" else "warning"
        props = [f"file={_gh_escape(d.path, prop=True)}"]
        if d.line is not None:
            props.append(f"line={d.line}")
            if d.col is not None:
                props.append(f"col={d.col}")
            if d.end_line is not None:
                props += [f"endLine={d.end_line}", f"endColumn={d.end_col}"]
        props.append(f"title={_gh_escape(f'sgcli {d.code} ({d.name})', prop=True)}")
        message = d.message + (f" (hint: {d.hint})" if d.hint else "")
        out.append(f"::{level} {','.join(props)}::{_gh_escape(message)}\n")
    return "".join(out)


def sarif(diags: list[Diagnostic], sources: dict[str, str]) -> str:
    """SARIF 2.1.0, for code-scanning dashboards: one run, the rules that fired, one result each."""
    from sgcli import __version__

    codes = sorted({d.code for d in diags})
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "fullDescription": {"text": RULES[code].explanation},
            "defaultConfiguration": {"level": "error" if RULES[code].severity == "error" else "warning"},
            "help": {"text": f"sgcli rule {code}"},
        }
        for code in codes
    ]
    results = []
    for d in diags:
        region = {}
        if d.line is not None:
            region = {"startLine": d.line, "startColumn": d.col or 1}
            if d.end_line is not None:
                region |= {"endLine": d.end_line, "endColumn": d.end_col or (d.col or 1)}
        location = {"artifactLocation": {"uri": d.path.replace(os.sep, "/")}}
        if region:
            location["region"] = region
        text = d.message + (f" (hint: {d.hint})" if d.hint else "")
        results.append(
            {
                "ruleId": d.code,
                "ruleIndex": codes.index(d.code),
                "level": "error" if d.severity == "error" else "warning",
                "message": {"text": text},
                "locations": [{"physicalLocation": location}],
                **({"properties": {"backend": d.backend}} if d.backend else {}),
            }
        )
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "sgcli", "version": __version__, "rules": rules}}, "results": results}],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def statistics(diags: list[Diagnostic], output_format: str = "concise") -> str:
    """Counts per rule, most frequent first, as `ruff --statistics` prints them: a table for people,
    a JSON array (`json`) or one object a line (`json-lines`) of {schema_version, code, name, count}
    (`sgcli schema lint-statistics`) for programs."""
    from collections import Counter

    counts = Counter(d.code for d in diags)
    names = {d.code: d.name for d in diags}
    rows = [
        {"schema_version": RECORD_SCHEMA_VERSION, "code": code, "name": names[code], "count": n}  # RuleCount
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    if output_format == "json":
        return json.dumps(rows, indent=2) + "\n"
    if output_format in ("json-lines", "jsonl"):
        return "".join(json.dumps(row) + "\n" for row in rows)
    width = len(str(max(counts.values()))) if counts else 1
    return "".join(f"{r['count']:>{width}}\t{r['code']}\t{r['name']}\n" for r in rows)


RENDERERS: dict[str, Callable[[list[Diagnostic], dict[str, str]], str]] = {
    "concise": concise,
    "full": full,
    "json": as_json,
    "json-lines": json_lines,
    "github": github,
    "sarif": sarif,
    "text": concise,  # the spellings every other command uses
    "jsonl": json_lines,
}


def summary(diags: list[Diagnostic], files: int, unreadable: int = 0, *, skipped: int = 0) -> str:
    """The last line on stderr. `skipped`: files of the folders left out (JSON that is not a schema)."""
    also = f", {skipped} skipped" if skipped else ""
    if unreadable:
        if not files:  # nothing else was linted: no count of "the other 0"
            return f"{plural(unreadable, 'file')} could not be linted (see the errors above){also}."
        found = plural(len(diags), "diagnostic") if diags else "no diagnostics"
        return (
            f"{plural(unreadable, 'file')} could not be linted (see the errors above); "
            f"{found} in the other {files}{also}."
        )
    if not diags:
        return f"All checks passed ({plural(files, 'file')}{also})."
    errors = sum(d.severity == "error" for d in diags)
    warnings = len(diags) - errors
    return (
        f"Found {plural(len(diags), 'diagnostic')} in {plural(files, 'file')}"
        f"{also} ({plural(errors, 'error')}, {plural(warnings, 'warning')})."
    )
