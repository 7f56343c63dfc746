"""One constraint through several backends (and JSON layouts): a row per backend and variant.

Every row uses the same prompt, constraint and seed; only the backend or the whitespace
variant changes, so differences in compile time, mask time, output and validity are the
backends' own. Without generation no model loads: each backend compiles against a tokenizer
and its masks are timed (walked along a sample text when given, checking each accepts it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sgcli import RECORD_SCHEMA_VERSION, tokenizers
from sgcli.app.local import new_session
from sgcli.app.model import ModelOptions
from sgcli.app.report import Reporter
from sgcli.backends import check_something_runs, check_supports, get_backend, skip_reason, unsupported_reason
from sgcli.backends.auto import AUTO_ORDER
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.guarantee import unenforced_error
from sgcli.backends.keyword_coverage import compiled_gaps, schema_gaps, unchecked
from sgcli.backends.matching import walk_masks
from sgcli.backends.schema_checker import with_checker
from sgcli.batch.requests import PromptOptions, Request
from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.dialects.embedded import embedded_schemas
from sgcli.engine import checkpoint
from sgcli.errors import UserError
from sgcli.serving import check_engine_supports, refuse_backend_choice
from sgcli.timing import percentile


@dataclass(frozen=True)
class CompareRequest:
    """One `sgcli compare-backends`: the constraint, the backends and layouts to compare, and how."""

    spec: ConstraintSpec
    backends: tuple[str, ...]
    variants: tuple[tuple[str, JsonOptions], ...]  # (name, JSON layout)
    prompt: str | None = None
    no_generate: bool = False  # compile and time the masks only
    text: str | None = None  # without generation: walk the masks along this sample output
    tokenizer: str | None = None  # without generation: this tokenizer, not the model's
    model: ModelOptions = ModelOptions()
    sampling: SamplingParams = SamplingParams()
    prompt_options: PromptOptions = field(default_factory=PromptOptions)
    allow_unenforced: bool = False  # else exit 2 where a backend to compare leaves a keyword to nothing


def run_compare(request: CompareRequest, reporter: Reporter) -> list[dict]:
    """A row per backend and variant (sgcli/records/ CompareRow); `agree` compares rows of one variant."""
    if not request.allow_unenforced:
        refuse_unenforced(request.spec, list(request.backends))
    if not request.no_generate:
        return _compare_generations(request, reporter)
    ref = request.tokenizer
    vocab = (tokenizers.load_tokenizer(ref) if ref is not None else request.model.tokenizer()).vocab
    return _compare_masks(request, vocab)


NO_LAYOUT = "-"  # the variant of a constraint no JSON layout shapes (a regex's row read "flexible")


def parse_variants(text: str | None, spec: ConstraintSpec) -> list[tuple[str, JsonOptions]]:
    """`flexible,compact,indent=2,max-whitespace=4` -> named JsonOptions (default: just the spec's own)."""
    base = spec.json_options
    if not text:
        laid_out = spec.takes_json_layout() or embedded_schemas(spec)  # an inline %json is JSON to lay out too
        return [(base.describe() if laid_out else NO_LAYOUT, base)]
    variants = []
    for item in (part.strip() for part in text.split(",")):
        key, _, value = item.partition("=")
        if item in ("flexible", "compact"):
            opts = dataclasses.replace(base, whitespace=item, indent=None, max_whitespace=None)
        elif key in ("indent", "max-whitespace") and value.isascii() and value.isdigit():
            layout = {"indent": None, "max_whitespace": None}
            layout["indent" if key == "indent" else "max_whitespace"] = int(value)
            opts = dataclasses.replace(base, whitespace="flexible", **layout)
        else:
            raise UserError(
                f"unknown --whitespace variant '{item}'",
                hint="use a comma-separated list of flexible, compact, indent=N, max-whitespace=N",
            )
        variants.append((item, opts))
    return variants


def check_some_row_runs(spec: ConstraintSpec, names: list[str], variants: list[tuple[str, JsonOptions]]) -> None:
    """Exit 2 before a model or tokenizer loads where every row would be skipped (`-b llguidance --indent 2`)."""
    pairs = [(n, _with_options(spec, opts)) for n in names for _, opts in variants]
    check_something_runs(pairs, "compare")


def pick_backends(names: list[str] | None, spec: ConstraintSpec) -> list[str]:
    """The backends to compare, in the order given without repeats: those named, and where 'all' (or 'auto')
    stands every installed grammar backend that takes this kind ('all' when none is named). `-b all -b none`
    is the union: 'all' once dropped the others."""
    chosen: list[str] = []
    for n in names or ["all"]:
        if n in ("all", "auto"):
            chosen += _every_grammar_backend(spec)
            continue
        backend = get_backend(n)
        if spec.kind not in backend.capabilities.kinds:
            check_supports(n, dataclasses.replace(spec, json_options=JsonOptions()))  # exit 2, naming who can
        chosen.append(backend.name)
    return list(dict.fromkeys(chosen))


def _every_grammar_backend(spec: ConstraintSpec) -> list[str]:
    """Every backend that reads `spec`'s kind, installed or not: one not installed gets its skip row,
    naming the extra (left out, the table said `agree yes` over one backend without a word)."""
    found = [n for n in AUTO_ORDER if spec.kind in get_backend(n).capabilities.kinds]
    if not any(get_backend(n).unavailable_reason() is None for n in found):
        raise UserError(f"no installed backend supports {spec.kind.label}", hint="see `sgcli backends`")
    return found


def refuse_server_side(engine: str, spec: ConstraintSpec, raw: bool) -> None:
    """A row per server-side backend needs an engine whose requests can choose one; say so when not."""
    check_engine_supports(engine, spec, raw=raw)
    refuse_backend_choice(
        engine,
        None,
        why="so there is no row per backend to compare on one server",
        hint=f"compare local backends (drop --engine), or start one {engine} server per backend and run "
        f"`sgcli generate --engine {engine} --base-url URL` against each",
    )
    raise AssertionError(f"{engine} declares per-request backends but compare-backends has no rows for them")


def _with_options(spec: ConstraintSpec, opts: JsonOptions) -> ConstraintSpec:
    subs = tuple(
        (n, dataclasses.replace(s, json_options=opts) if s.kind is Kind.JSON_SCHEMA else s) for n, s in spec.subgrammars
    )
    return dataclasses.replace(spec, json_options=opts, subgrammars=subs)


def _base_row(backend: str, variant: str) -> dict:
    row = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "backend": backend,
        "variant": variant,
        "compile_ms": None,
        "cache": None,
        "mask_ms_p50": None,
        "mask_ms_p99": None,
        "tokens": None,
        "tokens_per_s": None,
        "finish_reason": None,
        "valid": None,
        "output": None,
        "agree": None,
        "warnings": [],
        "error": None,
        "skipped": False,
        "errors": [],
        "allowed_first": None,
        "rejected_at_token": None,
    }  # one key set in both modes (sgcli/records/ CompareRow): nulls where a mode fills nothing
    return row


def _compile(backend_name: str, spec: ConstraintSpec, vocab, row: dict):
    backend = get_backend(backend_name)
    reason = skip_reason(backend, spec)
    if reason is not None:
        row.update(skipped=True, error=reason)
        return None

    try:
        outcome = compile_cached(backend, spec, vocab)
    except UserError as exc:
        row["error"] = exc.one_line()
        return None
    compiled = with_checker(outcome.compiled)  # what generate decodes with
    row["compile_ms"] = round(compiled.compile_s * 1000, 3)
    row["cache"] = outcome.status  # a hit's time is a load from disk, not a compile: say which
    row["warnings"] = [str(w) for w in compiled.warnings]
    for gap in compiled_gaps(compiled):
        done = "sgcli's schema checker enforces it" if gap.checker else "nothing enforces it (--allow-unenforced)"
        row["warnings"].append(f"{backend_name} does not enforce {gap.describe()}; {done}")
    return compiled


def refuse_unenforced(spec: ConstraintSpec, names: list[str]) -> None:
    """Exit 2 before anything loads where some backend to compare would leave a keyword enforced by nothing."""
    for name in names:
        nothing = unchecked(schema_gaps(spec, name)) if unsupported_reason(get_backend(name), spec) is None else []
        if nothing:
            raise unenforced_error(spec, name, nothing)


def _each_compiled(request: CompareRequest, vocab, rows: list[dict]):
    """(row, compiled) per backend and variant that compiled; every row, failed ones too, goes into `rows`."""
    for name in request.backends:
        for variant, opts in request.variants:
            row = _base_row(name, variant)
            rows.append(row)
            compiled = _compile(name, _with_options(request.spec, opts), vocab, row)
            if compiled is not None:
                yield row, compiled


def _mark_agreement(rows: list[dict], key: str) -> None:
    """`agree`: does this row's `key` equal that of the first successful row of the same variant?
    (Different whitespace variants differ by design, so they are not compared with each other.)"""
    reference: dict[str, object] = {}
    for r in rows:
        if r["error"] is None:
            reference.setdefault(r["variant"], r[key])
            r["agree"] = r[key] == reference[r["variant"]]


def _compare_masks(request: CompareRequest, vocab) -> list[dict]:
    rows: list[dict] = []
    for row, compiled in _each_compiled(request, vocab, rows):
        walk = walk_masks(compiled, request.text)
        row.update(
            mask_ms_p50=percentile(walk["mask_ms"], 0.5, 4),
            mask_ms_p99=percentile(walk["mask_ms"], 0.99, 4),
            tokens=walk["steps"] - 1,
            valid=walk["accepted"],
            allowed_first=walk["allowed_first"],
            rejected_at_token=walk["rejected_at_token"],
            mask_digests=walk["digests"],
        )
        if walk["error"] is not None:
            row["error"] = f"the {compiled.backend} matcher failed at token {walk['steps'] - 1}: {walk['error']}"
        elif request.text is not None and not walk["accepted"] and walk["rejected_at_token"] is None:
            # every token taken, and the grammar cannot stop there: `masks` calls this a prefix
            row["errors"] = ["a prefix: the grammar takes every token of the text but cannot stop after it"]
        if request.text is not None and not get_backend(compiled.backend).capabilities.enforces:
            _judge_independently(row, compiled.spec, request.text)
    _mark_agreement(rows, "mask_digests")
    for r in rows:
        r.pop("mask_digests", None)
    return rows


def _judge_independently(row: dict, spec: ConstraintSpec, text: str) -> None:
    """A backend that constrains nothing (`none`) takes any --text, so its yes says nothing: its row gets
    the verdict of sgcli's own check instead, the one generate's outputs get."""
    from sgcli.validation.validate import validate

    verdict = validate(spec, text, finish_reason="stop", grammar_complete=True)
    row.update(valid=verdict.valid, errors=verdict.errors)
    if verdict.valid is None:
        row["warnings"].append(f"nothing independent could check --text: {verdict.unchecked}")
    else:
        row["warnings"].append("valid is sgcli's own check of --text: this backend constrains nothing")


def _compare_generations(request: CompareRequest, reporter: Reporter) -> list[dict]:
    from sgcli.engine.session import Done  # torch

    model = request.model
    ref = model.ref()
    with reporter.stage(f"loading {ref.display}") as progress:
        tokenizer = model.tokenizer(progress=lambda t: progress(t, 0, 3))
        lm = model.load(ref, progress)
    checkpoint.check_logits_fit(lm, checkpoint.text_tokens(tokenizer.vocab))
    vocab = tokenizer.vocab.padded(lm.logits_width)
    rows: list[dict] = []
    for row, compiled in _each_compiled(request, vocab, rows):
        session = new_session(lm, tokenizer, compiled, request.sampling, request.prompt_options)
        record = next(e.record for e in session.stream(Request(None, request.prompt)) if isinstance(e, Done))
        t = record["timings"]
        row.update(
            mask_ms_p50=t["mask_ms_p50"],
            mask_ms_p99=t.get("mask_ms_p99"),
            tokens=record["usage"]["completion_tokens"],
            tokens_per_s=t["tokens_per_s"],
            finish_reason=record["finish_reason"],
            valid=record["valid"],
            output=record["output"],
            errors=record["errors"],
        )
    _mark_agreement(rows, "output")
    return rows
