"""`$schema` as real schemas write it: a near miss of a draft's URI is read as that draft, anything else
as draft 2020-12, by every part of sgcli alike, and llguidance is given the draft's own URI.

Found on the JSON Schema Store sample (25 of 496 name such a URI) and on Snowplow's schemas (all of them):
jsonschema read `https://json-schema.org/draft-04/schema#` as 2020-12 and refused a valid draft-04 schema,
and llguidance tried to fetch every such URI and refused the schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from sgcli.backends import compile_for
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.schema_patterns import pattern_validator
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.lint.runner import byte_vocab
from sgcli.lint.schema_checks import accepts
from sgcli.validation.verdict import schema_errors

DRAFT4_NEAR_MISS = {
    "$schema": "https://json-schema.org/draft-04/schema#",  # draft-04's URI is http://
    "type": "integer",
    "maximum": 10,
    "exclusiveMaximum": True,  # draft-04's boolean form: 10 itself is out
}


@pytest.mark.parametrize(
    ("written", "cls", "near"),
    [
        (None, jsonschema.Draft202012Validator, False),
        ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator, False),
        ("http://json-schema.org/draft-07/schema", jsonschema.Draft7Validator, False),
        ("https://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator, True),
        ("https://json-schema.org/draft-04/schema", jsonschema.Draft4Validator, True),
        ("http://json-schema.org/draft/2019-09/schema#", jsonschema.Draft201909Validator, True),
        ("http://json-schema.org/schema#", jsonschema.Draft202012Validator, False),
        ("http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#",)
        + (jsonschema.Draft202012Validator, False),
    ],
)
def test_the_draft_a_schema_is_read_under(written, cls, near):
    dialect = dialect_of({} if written is None else {"$schema": written})
    assert dialect.cls is pattern_validator(cls) and dialect.near_miss is near  # the draft's, patterns read as ECMA-262
    exact = written is None or jsonschema.validators.validator_for({"$schema": written}, default=None) is not None
    assert (dialect.note is None) is exact


def test_a_near_miss_of_draft_04_is_validated_and_compiled_as_draft_04():
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(DRAFT4_NEAR_MISS), "d4.json")
    check_schema(spec)  # 2020-12's rules refused it: `exclusiveMaximum` must be a number there
    assert schema_errors(DRAFT4_NEAR_MISS, 9) == [] and schema_errors(DRAFT4_NEAR_MISS, 10) != []
    compiled, fallbacks = compile_for("auto", spec, byte_vocab())
    assert compiled.backend == "llguidance" and fallbacks == []
    assert accepts(compiled, "9") and not accepts(compiled, "10")
    assert any("is not draft 4's URI" in w.message for w in compiled.warnings)


def test_a_schema_invalid_under_the_draft_it_names_is_still_refused():
    bad = dict(DRAFT4_NEAR_MISS, exclusiveMaximum="yes")
    with pytest.raises(UserError, match="exclusiveMaximum"):
        check_schema(ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(bad), "bad.json"))


def test_lint_reports_a_mistaken_draft_uri_but_not_a_vendors_own_meta_schema(tmp_path):
    from sgcli.lint import Linter, LintOptions

    def j007(uri: str) -> list:
        path = tmp_path / "s.json"
        path.write_text(json.dumps({"$schema": uri, "type": "integer"}))
        return [d for d in Linter(LintOptions(backend="llguidance")).lint(str(path)).diagnostics if d.code == "J007"]

    assert (
        j007("https://json-schema.org/draft-07/schema#")[0].hint
        == 'write "$schema": "http://json-schema.org/draft-07/schema#"'
    )
    assert j007("http://json-schema.org/schema#")  # the old "latest" alias: name the draft
    assert not j007("http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#")
    assert not j007("http://json-schema.org/draft-07/schema#")
