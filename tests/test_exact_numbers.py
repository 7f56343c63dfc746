"""`multipleOf` read as the numbers are written: jsonschema's float division called 0.3 no multiple of 0.1."""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.exact_numbers import is_multiple


def _valid(schema, instance) -> bool:
    return dialect_of(schema).cls(schema).is_valid(instance)


@pytest.mark.parametrize("value", [0.3, 0.6, 0.7, 1.2, 2.3, -0.9, 3, 0, 1e20])
def test_a_decimal_multiple_is_a_multiple(value):
    import jsonschema

    schema = {"multipleOf": 0.1}
    assert _valid(schema, value)
    if value in (0.3, 0.6, 0.7, 1.2):  # what jsonschema's own float division says
        assert not jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize(
    ("value", "divisor"), [(0.25, 0.1), (0.30000000000000004, 0.1), (1e-300, 0.1), (7, 2), (0.07, 0.02)]
)
def test_a_number_that_is_no_multiple_is_refused(value, divisor):
    assert not _valid({"multipleOf": divisor}, value)
    assert is_multiple(value, divisor) is False


def test_the_output_check_reads_it_so(run_cli, tmp_path):
    """A server's `{"f": 0.3}` under `multipleOf: 0.1` was `valid: false`; `sgcli test` judged it so too."""
    schema = tmp_path / "f.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"f": {"type": "number", "multipleOf": 0.1}}}))
    cases = tmp_path / "f.test.yaml"
    cases.write_text(
        f"grammar: {schema.name}\ncases:\n  - {{input: '{{\"f\":0.3}}', accept: true}}\n"
        "  - {input: '{\"f\":0.35}', accept: false}\n"
    )
    result = run_cli("test", cases, "--backend", "xgrammar", "--json")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 0, result.output
    assert [r["passed"] for r in rows if r["type"] == "case"] == [True, True]
