"""After generation: does the output actually satisfy the constraint? Checked, not assumed.

The grammar a backend compiled is the generator; asking its own matcher whether it agrees
with itself proves nothing (and with `--backend none` there is no matcher at all). So every
output is checked by an independent implementation, and the verdict says which one:

  kind             validated_by     how
  JSON Schema      jsonschema       json.loads, then the `jsonschema` library (formats too)
  regex            regex            the `regex` package, in the backend's dialect (constraints/regex_dialects)
  choice           choices          string equality
  Lark / GBNF      lark             the `lark` library's Earley parser (lark_check), llguidance's
                   lark+jsonschema  extensions read; JSON from `@name` / `%json` sub-grammars
                                    validated against its schema (then lark+jsonschema)
  structural tags  structural_tags  tags found by their begin/end strings, contents checked
                                    as above (tag_check)

Where no independent check exists (llguidance's own grammar JSON, a grammar the lark library
cannot read, a regex the `regex` package cannot read) `valid` is None, with the reason in
`unchecked`: never True. A regex may fall back to the backend's matcher as a last resort: its
refusal makes the output invalid (`validated_by` says so), its acceptance is only noted in
`unchecked` (valid stays None). Output cut off before the constraint completed is never valid.

Exit codes follow: a run fails (exit 1) only on `valid: false`; `valid: null` is not a
success claim, and the CLI says "unchecked" with the reason.
"""

from __future__ import annotations

from collections.abc import Callable

from sgcli.constraints.regex_dialects import DialectError, fullmatch
from sgcli.constraints.spec import ConstraintSpec, Kind, parse_json
from sgcli.validation.verdict import Unchecked, Verdict, json_verdict


def validate(
    spec: ConstraintSpec,
    output: str,
    *,
    finish_reason: str,
    grammar_complete: bool,
    dialect: str = "rust",
    matcher_check: Callable[[str], bool] | None = None,
    backend: str | None = None,
) -> Verdict:
    """The verdict on `output`. `dialect`: how the backend read regexes ("rust" or "ecma");
    `matcher_check`: the backend's own matcher re-fed the output, used only when a regex has
    no independent reading (and `backend` names it in `validated_by`)."""
    errors = _finish_errors(finish_reason, grammar_complete)
    verdict = Verdict(valid=None)
    try:
        try:
            verdict = _check(spec, output, dialect)
        except RecursionError:
            raise Unchecked("the output or constraint is nested too deeply for the checker") from None
    except Unchecked as exc:
        verdict.unchecked = str(exc)
        if spec.kind is Kind.REGEX and matcher_check is not None:
            # the backend agreeing with itself is no check: its yes stays information in `unchecked`
            # (valid null), its no still fails the output
            if matcher_check(output):
                verdict.unchecked = f"{exc}; {backend}'s own matcher accepts the output (not an independent check)"
            else:
                verdict.validated_by = f"{backend} matcher (last resort: {exc})"
                verdict.errors.append(f"output does not match the regex {spec.text!r} ({backend}'s matcher)")
        elif not grammar_complete and finish_reason not in ("length", "repetition", "error"):
            errors.append("output is not a complete sentence of the grammar (the backend's matcher says so)")
    verdict.errors = errors + verdict.errors
    if verdict.errors:
        verdict.valid = False
    elif verdict.unchecked is None:
        verdict.valid = True
    return verdict


def _finish_errors(finish_reason: str, grammar_complete: bool) -> list[str]:
    if finish_reason == "length":
        return [
            "output was cut off by --max-tokens before the constraint was complete"
            if not grammar_complete
            else "output hit --max-tokens"
        ]
    if finish_reason == "repetition":  # ended early like a cut-off: never a success (errors say where)
        return [
            "output was ended by the repetition guard before the constraint was complete"
            if not grammar_complete
            else "output was ended by the repetition guard"
        ]
    if finish_reason == "error":
        return ["generation stopped on a grammar error"]
    return []


def _check(spec: ConstraintSpec, output: str, dialect: str) -> Verdict:
    """The independent check for the spec's kind; raises Unchecked where there is none."""
    kind = spec.kind
    if kind is Kind.NONE:
        return Verdict(True, validated_by="unconstrained")
    if kind is Kind.JSON_SCHEMA:
        return json_verdict(spec.schema(), output)
    if kind in (Kind.REGEX, Kind.CHOICE):
        return Verdict(None, errors=regex_errors(spec, output, dialect), validated_by=kind_checker(kind))
    if kind in (Kind.LARK, Kind.EBNF):
        from sgcli.validation import lark_check

        errors, by = lark_check.checked(spec, output)
        return Verdict(None, errors=errors, validated_by=by)
    if kind is Kind.LLGUIDANCE:
        return _llguidance_verdict(spec, output, dialect)
    if kind is Kind.STRUCTURAL_TAG:
        from sgcli.validation.tag_check import tag_errors

        return Verdict(None, errors=tag_errors(spec, output, dialect), validated_by="structural_tags")
    raise Unchecked(f"no checker independent of the backend reads a {kind.label}")


def _llguidance_verdict(spec: ConstraintSpec, output: str, dialect: str) -> Verdict:
    """llguidance's top-level grammar JSON: checkable when it holds one grammar, a JSON Schema or Lark."""
    import dataclasses

    doc = parse_json(spec.text, spec.origin)
    grammars = doc.get("grammars") if isinstance(doc, dict) else None
    if not isinstance(grammars, list) or len(grammars) != 1 or not isinstance(grammars[0], dict):
        raise Unchecked("only an llguidance grammar with one JSON Schema or Lark grammar can be checked apart from it")
    (entry,) = grammars
    if "json_schema" in entry:
        return json_verdict(entry["json_schema"], output)
    if isinstance(entry.get("lark_grammar"), str):
        lark_spec = dataclasses.replace(spec, kind=Kind.LARK, text=entry["lark_grammar"])
        return _check(lark_spec, output, dialect)
    raise Unchecked("no checker independent of llguidance reads this grammar entry")


def kind_checker(kind: Kind) -> str:
    return "choices" if kind is Kind.CHOICE else "regex"


def regex_errors(spec: ConstraintSpec, output: str, dialect: str) -> list[str]:
    if spec.kind is Kind.CHOICE:
        return [] if output in spec.choices else [f"output is not one of the choices {list(spec.choices)}"]

    try:
        matched = fullmatch(spec.text, output, dialect)
    except DialectError as exc:
        raise Unchecked(f"the regex package cannot read the {dialect} regex {spec.text!r}: {exc}") from None
    return [] if matched else [f"output does not match the regex {spec.text!r} (read in the {dialect} dialect)"]
