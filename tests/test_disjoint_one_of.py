"""A `oneOf` whose branches cannot overlap is enforced exactly by a grammar that writes it as `anyOf`
(xgrammar, outlines-core): pydantic's discriminated unions were refused by `convert` and counted as a
gap, though each branch requires its own constant tag."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from sgcli.backends import compile_for
from sgcli.backends.disjoint import disjoint_types
from sgcli.backends.keyword_coverage import schema_gaps
from sgcli.backends.matching import feed
from sgcli.backends.outlines_coverage import dropped_keywords
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint.runner import byte_vocab


def owner_schema() -> dict:
    """What pydantic writes for a union discriminated by `pet_type` (oneOf of $refs, a const in each)."""
    from typing import Literal, Union

    from pydantic import BaseModel, Field

    class Cat(BaseModel):
        pet_type: Literal["cat"]
        meows: int

    class Dog(BaseModel):
        pet_type: Literal["dog"]
        barks: float

    class Owner(BaseModel):
        pet: Union[Cat, Dog] = Field(discriminator="pet_type")  # noqa: UP007 (as users write it)

    return Owner.model_json_schema()


def _obj(tag, **more) -> dict:
    return {"type": "object", "properties": {"t": tag} | more, "required": ["t"]}


@pytest.mark.parametrize(
    ("branches", "disjoint"),
    [
        ([{"type": "string"}, {"type": "integer"}], True),
        ([{"type": "integer"}, {"type": "number"}], False),  # 1 is both
        ([_obj({"const": "a"}), _obj({"const": "b"})], True),
        ([_obj({"const": "a"}), _obj({"enum": ["b"]})], True),
        ([_obj({"const": "a"}), _obj({"const": "a"})], False),
        ([_obj({"const": 1}), _obj({"const": 1.0})], False),  # one number in JSON
        ([_obj({"const": "a"}), _obj({"enum": ["b", "c"]})], False),
        ([_obj({"const": "a"}), {"properties": {"t": {"const": "b"}}, "required": ["t"]}], False),  # "x" fits both
        ([_obj({"const": "a"}), {"type": "object", "properties": {"t": {"const": "b"}}}], False),  # t optional
    ],
)
def test_which_branches_are_disjoint(branches, disjoint):
    assert disjoint_types(branches) is disjoint
    if disjoint:  # the proof is sound: no instance of one branch is an instance of another
        probes = [{"t": "a"}, {"t": "b"}, {"t": 1}, {"t": 1.0}, "x", 1, {}]
        for probe in probes:
            assert sum(Draft202012Validator(b).is_valid(probe) for b in branches) <= 1, probe


def _gaps(schema: dict, backend: str) -> list[str]:
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "pets.json")
    return [g.pointer for g in schema_gaps(spec, backend) if g.keyword == "oneOf"]


def test_a_discriminated_union_has_no_one_of_gap_and_converts(run_cli, tmp_path):
    owner = owner_schema()
    union = {"$defs": owner["$defs"], "oneOf": owner["properties"]["pet"]["oneOf"]}
    assert (_gaps(union, "xgrammar"), _gaps(union, "outlines_core")) == ([], [])
    assert [p for p, _ in dropped_keywords(union) if p.endswith("/oneOf")] == []
    path = tmp_path / "owner.json"
    path.write_text(json.dumps(owner))
    converted = run_cli("convert", str(path), "--to", "gbnf")
    assert converted.exit_code == 0, converted.output
    # overlapping branches still are a gap, and convert still refuses them
    owner["$defs"]["Dog"]["properties"]["pet_type"]["const"] = "cat"
    assert (_gaps(union, "xgrammar"), _gaps(union, "outlines_core")) == (["/oneOf"], ["/oneOf"])
    path.write_text(json.dumps(owner))
    assert run_cli("convert", str(path), "--to", "gbnf").exit_code == 2


def test_xgrammars_grammar_takes_exactly_the_unions_instances():
    schema = owner_schema()
    vocab = byte_vocab()
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "owner.json")
    compiled = compile_for("xgrammar", spec, vocab)[0]
    texts = [
        '{"pet": {"pet_type": "cat", "meows": 3}}',
        '{"pet": {"pet_type": "dog", "barks": 1.5}}',
        '{"pet": {"pet_type": "cat", "barks": 1.5}}',
        '{"pet": {"pet_type": "bird", "meows": 3}}',
    ]
    for text in texts:
        valid = Draft202012Validator(schema).is_valid(json.loads(text))
        assert feed(compiled, vocab.encode(text)).accepted == valid, text
