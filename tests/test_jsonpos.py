"""JSON pointers are decoded in one place (RFC 6901), and located in the file's text."""

from __future__ import annotations

import json

from sgcli.constraints.jsonpos import SchemaText, locate, pointer_of, pointer_parts, resolve_ref
from sgcli.errors import offset_to_line_col

DOC = {"$defs": {"a/b": {"type": "integer"}, "t~x": [{"const": 1}, {"const": 2}], "sp ace": True}}


def test_pointer_parts_unescapes_in_rfc_order():
    assert pointer_parts("") == []
    assert pointer_parts("/a~1b/~01/0") == ["a/b", "~1", "0"]
    for path in (["a/b"], ["t~x", "1"], ["~01", ""]):
        assert pointer_parts(pointer_of(path)) == path


def test_resolve_ref_walks_objects_and_arrays():
    assert resolve_ref(DOC, "#") == (DOC, ())
    assert resolve_ref(DOC, "#/$defs/a~1b") == ({"type": "integer"}, ("$defs", "a/b"))
    assert resolve_ref(DOC, "#/$defs/t~0x/1") == ({"const": 2}, ("$defs", "t~x", 1))
    assert resolve_ref(DOC, "#/$defs/sp%20ace") == (True, ("$defs", "sp ace"))  # URI fragments are %-encoded


def test_resolve_ref_refuses_what_it_cannot_name():
    for ref in ("#/$defs/missing", "#/$defs/t~0x/2", "#/$defs/t~0x/-", "other.json#/a", "#anchor", "#/$defs/t~0x/¹"):
        assert resolve_ref(DOC, ref) is None, ref


def test_schema_text_path_of_types_array_indexes_from_the_text():
    text = json.dumps(DOC, indent=2)
    stext = SchemaText(text)
    assert stext.path_of("/$defs/t~0x/1") == ("$defs", "t~x", 1)
    assert stext.path_of("/$defs/t~0x/١") == ("$defs", "t~x", "١")  # an index is ASCII digits (RFC 6901)
    assert stext.path_of("/$defs/a~1b/type") == ("$defs", "a/b", "type")
    line, col = locate(text, stext.path_of("/$defs/t~0x/1"))
    offset = sum(len(x) + 1 for x in text.splitlines()[: line - 1]) + col - 1
    assert json.JSONDecoder().raw_decode(text, offset)[0] == {"const": 2}


def test_locate_agrees_with_the_offsets_of_every_value():
    """`locate` walks only down its path; every value's position must match the full scan's."""
    text = '{\n  "a": [1, {"b~/c": "x"}, [ ]],\n  "d" : {"e": {}, "e": {"f": null}},\n  "g": "}"\n}'
    stext = SchemaText(text)
    for pointer, offset in stext.offsets.items():
        assert locate(text, stext.path_of(pointer)) == offset_to_line_col(text, offset), pointer


def test_locate_falls_back_to_the_nearest_parent_and_takes_a_repeated_key_last():
    text = '{"d": {"e": 1, "e": {"f": 2}}, "a": [0, 1]}'
    assert locate(text, ("d", "e", "f")) == (1, 27)  # inside the second "e", the one json.loads keeps
    assert locate(text, ("d", "missing", "x")) == (1, 7)  # the value of "d"
    assert locate(text, ("a", 5)) == locate(text, ("a", "01")) == (1, 37)  # no such index: the array
    assert locate(text, ("a", 1)) == locate(text, ("a", "1")) == (1, 41)
    assert locate("[1, 2", (1, 0)) == (1, 5)  # broken JSON: the deepest value reached
