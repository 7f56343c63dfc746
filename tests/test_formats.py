"""The OpenAPI formats sgcli checks beside jsonschema's (sgcli/constraints/formats.py): each one's
meaning, the after-the-fact validation and the decode-time checker agreeing, and schemas that use
them generated from instead of refused."""

from __future__ import annotations

import json

import pytest

from sgcli.backends import compile_for
from sgcli.backends.guarantee import guarantee
from sgcli.backends.keyword_coverage import compiled_gaps
from sgcli.backends.matching import feed
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint.runner import byte_vocab
from sgcli.validation.verdict import schema_errors

CASES = {
    "int8": ([-128, 127, 0, 5.0, "x"], [128, -129, 1.5]),
    "int32": ([2**31 - 1, -(2**31), 7], [2**31, -(2**31) - 1, 0.5]),
    "int64": ([2**63 - 1, -(2**63)], [2**63, -(2**63) - 1]),
    "uint16": ([0, 65535], [-1, 65536]),
    "uint64": ([2**64 - 1], [2**64, -1]),
    "float": ([3.4e38, -1.5, 0], [3.5e38, -1e39]),
    "double": ([1e308, -1e308], []),
    "byte": (["", "YQ==", "YWI=", "YWJj", 5], ["YQ", "abc", "Y===", "YW Jj"]),
    "base64url": (["", "YQ", "YWI", "_-_-", "YQ=="], ["Y", "a+b/", "YWJj="]),
    "binary": (["", "\u0000\u00ff anything"], []),
    "password": (["hunter2"], []),
    "int-or-string": ([3, "3", "50%", 2.0], [1.5, None, [], {}, True]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_format_means_what_the_registry_says(name):
    good, bad = CASES[name]
    for value in good:
        assert schema_errors({"format": name}, value) == [], (name, value)
    for value in bad:
        assert schema_errors({"format": name}, value), (name, value)


def test_jsonschema_keeps_its_own_formats():
    assert schema_errors({"format": "date"}, "2026-12-04") == []
    assert schema_errors({"format": "date"}, "2026-13-04")
    assert schema_errors({"format": "x-made-up"}, "anything") == []  # unknown: an annotation, as before


def test_an_openapi_schema_is_generated_from_not_refused_and_the_checker_holds_its_formats():
    """Before, `format: int32` was a keyword nothing enforced: exit 2 unless --allow-unenforced."""
    schema = {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "format": "int32"},
            "port": {"format": "int-or-string", "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "data": {"type": "string", "format": "byte"},
        },
        "required": ["replicas", "port", "data"],
        "additionalProperties": False,
    }
    vocab = byte_vocab()
    for backend in ("auto", "llguidance", "xgrammar"):
        compiled = compile_for(backend, ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "k.json"), vocab)[0]
        kept = guarantee(compiled)  # no exit 2: the checker takes every format the grammar leaves
        assert kept.unenforced == [] and all(g.checker for g in compiled_gaps(compiled)), backend
        for text, valid in (
            ('{"replicas":2147483647,"port":"http","data":"YWJj"}', True),
            ('{"replicas":2147483648,"port":"http","data":"YWJj"}', False),
            ('{"replicas":1,"port":8080,"data":"YWJ"}', False),
            ('{"replicas":1,"port":8080,"data":""}', True),
        ):
            assert feed(compiled, vocab.encode(text)).accepted == valid, (backend, text)
            assert (schema_errors(schema, json.loads(text)) == []) == valid, text
