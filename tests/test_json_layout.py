"""Each JSON-layout flag means the same on every backend that takes it (and exit 2 on those that don't).

The expected verdict comes from the flag's definition applied to the text's whitespace
runs (sgcli's JsonOptions docstring), not from any backend; every backend must agree with it.
"""

from __future__ import annotations

import json
import re

import pytest

from sgcli.backends import check_supports
from sgcli.backends.matching import enforcing_backends
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
TEXTS = [
    '{"a":1,"b":[1,2]}',
    '{"a": 1, "b": [1, 2]}',
    '{"a":\t1,\t"b":\t[1,\t2]}',
    '{\t"a"\t:\t1\t,\t"b"\t:\t[\t1\t,\t2\t]\t}',
    '{\t\t"a":1,"b":[]}',
    '{"a":\t\t\t1,"b":[]}',
    '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}',
    '{\n  "a": 1,\n  "b": []\n}',
    ' {"a":1,"b":[]}',
    '{"a":1,"b":[]} ',
    '{"a":1,"b":[ ]}',
    '{"a":1,"b":[\t]}',
    '{"a"   :1,"b":[]}',
    '{"a"    :1,"b":[]}',
    '{"a":1 ,"b":[1 ,2]}',
]
LAYOUTS = {
    "flexible": JsonOptions(),
    "compact": JsonOptions(whitespace="compact"),
    "indent": JsonOptions(indent=2),
    "max-whitespace": JsonOptions(max_whitespace=3),
    "whitespace-pattern": JsonOptions(whitespace_pattern=r"[\t]{1,2}"),
}


def _runs(text: str) -> tuple[list[str], str, str]:
    """(whitespace runs between tokens, leading run, trailing run), strings skipped."""
    inner, runs, i = text.strip(" \t\n\r"), [], 0
    while i < len(inner):
        i = inner.index('"', i + 1) + 1 if inner[i] == '"' else i + 1  # past one token (no escapes in TEXTS)
        m = re.match(r"[ \t\n\r]*", inner[i:])
        runs.append(m.group())
        i += m.end()
    lead = text[: len(text) - len(text.lstrip(" \t\n\r"))]
    return runs, lead, text[len(text.rstrip(" \t\n\r")) :]


def expected(o: JsonOptions, text: str) -> bool:
    runs, lead, trail = _runs(text)
    if lead or trail:
        return False  # whitespace is between tokens only
    if o.indent is not None:
        return text == json.dumps(json.loads(text), indent=o.indent)
    if o.whitespace == "compact":
        return not any(runs)
    if o.max_whitespace is not None:
        return all(len(r) <= o.max_whitespace for r in runs)
    if o.whitespace_pattern is not None:
        return all(r == "" or re.fullmatch(o.whitespace_pattern, r) for r in runs)
    return True


def test_the_oracle_is_not_trivial():
    for name, o in LAYOUTS.items():
        verdicts = {expected(o, t) for t in TEXTS}
        assert verdicts == {True, False}, name


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_backend_accepts_and_rejects_what_the_flag_means(layout):
    from sgcli.backends.matching import accepts_bytes
    from sgcli.lint.runner import byte_vocab

    options = LAYOUTS[layout]
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SCHEMA), "layout.json", json_options=options)
    ran = []
    for name in enforcing_backends():
        try:
            backend = check_supports(name, spec)
        except UserError as exc:  # refused up front, naming the flag: never a different language
            assert "does not support" in exc.render() or "not usable" in exc.render(), exc.render()
            continue
        compiled = backend.compile(spec, byte_vocab())
        got = [accepts_bytes(compiled, t.encode()).accepted for t in TEXTS]
        want = [expected(options, t) for t in TEXTS]
        wrong = [t for t, g, w in zip(TEXTS, got, want) if g != w]
        assert not wrong, f"{name} {layout}: disagrees with the flag's meaning on {wrong}"
        ran.append(name)
    assert ran, f"no backend takes {layout}"
    if layout == "whitespace-pattern":
        assert {"llguidance", "outlines_core"} <= set(ran)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"whitespace": "compact", "indent": 2}, ("--json-whitespace compact", "--indent")),
        ({"whitespace": "compact", "max_whitespace": 2}, ("--json-whitespace compact", "--max-whitespace")),
        ({"whitespace_pattern": "[ ]?", "max_whitespace": 2}, ("--whitespace-pattern", "--max-whitespace")),
        ({"indent": 2, "whitespace_pattern": "[ ]?"}, ("--indent", "--whitespace-pattern")),
    ],
)
def test_contradictory_layouts_are_refused_naming_both_flags(kwargs, named):
    with pytest.raises(UserError) as info:
        JsonOptions(**kwargs)
    assert all(flag in info.value.message for flag in named), info.value.message


def test_a_broken_whitespace_pattern_is_refused_before_any_backend():
    with pytest.raises(UserError) as info:
        JsonOptions(whitespace_pattern="[ \t")
    assert "--whitespace-pattern is not a valid regex" in info.value.message


def test_readme_and_config_name_the_same_compact_commands():
    """`sgcli config` and the README named different commands (bench --generate, convert) as the
    compact-by-default ones: both now name the commands whose constraint flags generate's layout."""
    from pathlib import Path

    from sgcli.cli.config_cmd import DEFAULT_NOTES

    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    listed = re.search(r"compiles for `generate` \(([^;)]*)", readme).group(1)
    in_readme = set(re.findall(r"`([a-z-]+)`", listed))
    in_config = set(re.search(r"\(([^)]*)\)", DEFAULT_NOTES["json-whitespace"]).group(1).split(", "))
    assert in_readme == in_config == {"generate", "compare-backends", "compile", "lint", "convert"}
