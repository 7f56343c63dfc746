"""`sgcli compare-backends`: one constraint, several backends (and JSON layouts), side by side.

Every row uses the same prompt, constraint and seed; only the backend or the whitespace
variant changes, so differences in compile time, mask time, output and validity are the
backends' own. `--no-generate` loads no model: it compiles against a tokenizer and times
the masks (walking them along `--text` when given, checking each backend accepts it).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import typer

from sgcli.backends import check_supports, get_backend, unsupported_reason
from sgcli.backends.auto import AUTO_ORDER
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.keyword_coverage import compiled_gaps, schema_gaps, unchecked, unenforced_error
from sgcli.backends.matching import walk_masks
from sgcli.backends.schema_checker import with_checker
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli import engine_options as eo
from sgcli.cli import model_options as mo
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, err, out, output_format_of
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from sgcli.serving import check_engine_supports
from sgcli.timing import percentile

EXAMPLES = """
Examples:

  sgcli compare-backends --schema s.json "Describe Paris as JSON"

  sgcli compare-backends --schema s.json --whitespace flexible,compact,indent=2 "..." --json

  sgcli compare-backends --no-generate --schema s.json --text '{"name": "Paris"}'

  sgcli compare-backends -b llguidance -b outlines_core --regex '[0-9]{3}' "Pick a number"
"""


def parse_variants(text: str | None, base: JsonOptions) -> list[tuple[str, JsonOptions]]:
    """`flexible,compact,indent=2,max-whitespace=4` -> named JsonOptions (default: just `base`)."""
    if not text:
        return [(base.describe(), base)]
    variants = []
    for item in (part.strip() for part in text.split(",")):
        key, _, value = item.partition("=")
        if item in ("flexible", "compact"):
            opts = dataclasses.replace(base, whitespace=item, indent=None, max_whitespace=None)
        elif key in ("indent", "max-whitespace") and value.isdigit():
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


def _with_options(spec: ConstraintSpec, opts: JsonOptions) -> ConstraintSpec:
    subs = tuple(
        (n, dataclasses.replace(s, json_options=opts) if s.kind is Kind.JSON_SCHEMA else s) for n, s in spec.subgrammars
    )
    return dataclasses.replace(spec, json_options=opts, subgrammars=subs)


def pick_backends(names: list[str] | None, spec: ConstraintSpec) -> list[str]:
    """The backends to compare: those named, or every grammar backend that takes this kind ('all', or none named)."""

    chosen = list(names or [])
    if chosen and not {"all", "auto"} & set(chosen):
        for n in chosen:
            backend = get_backend(n)
            if spec.kind not in backend.capabilities.kinds:
                check_supports(n, dataclasses.replace(spec, json_options=JsonOptions()))  # exit 2, naming who can
        return [get_backend(n).name for n in chosen]
    chosen = [
        n
        for n in AUTO_ORDER
        if spec.kind in get_backend(n).capabilities.kinds and get_backend(n).unavailable_reason() is None
    ]
    if not chosen:
        raise UserError(f"no installed backend supports {spec.kind.label}", hint="see `sgcli backends`")
    return chosen


def _base_row(backend: str, variant: str) -> dict:
    from sgcli import RECORD_SCHEMA_VERSION

    row = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "backend": backend,
        "variant": variant,
        "compile_ms": None,
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
    lacking = unsupported_reason(backend, spec)
    if lacking is not None or backend.unavailable_reason():
        reason = (
            f"does not support {lacking}" if lacking is not None else f"is not usable: {backend.unavailable_reason()}"
        )
        row.update(skipped=True, error=f"{backend_name} {reason}")
        return None

    try:
        compiled = with_checker(compile_cached(backend, spec, vocab).compiled)  # what generate decodes with
    except UserError as exc:
        row["error"] = exc.render().removeprefix("error: ")
        return None
    row["compile_ms"] = round(compiled.compile_s * 1000, 3)
    row["warnings"] = [str(w) for w in compiled.warnings]
    for gap in compiled_gaps(compiled):
        done = "sgcli's schema checker enforces it" if gap.checker else "nothing enforces it (--allow-unenforced)"
        row["warnings"].append(f"{gap.pointer}: {backend_name} does not enforce `{gap.keyword}`; {done}")
    return compiled


def refuse_unenforced(spec: ConstraintSpec, names: list[str]) -> None:
    """Exit 2 before anything loads where some backend to compare would leave a keyword enforced by nothing."""
    for name in names:
        nothing = unchecked(schema_gaps(spec, name)) if unsupported_reason(get_backend(name), spec) is None else []
        if nothing:
            raise unenforced_error(spec, name, nothing)


def _each_compiled(spec, names, variants, vocab, rows: list[dict]):
    """(row, compiled) per backend and variant that compiled; every row, failed ones too, goes into `rows`."""
    for name in names:
        for variant, opts in variants:
            row = _base_row(name, variant)
            rows.append(row)
            compiled = _compile(name, _with_options(spec, opts), vocab, row)
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


def _server_side_backends(engine_flags: eo.EngineFlags, spec: ConstraintSpec, raw: bool) -> None:
    """A row per server-side backend needs an engine whose requests can choose one; say so when not."""
    engine_flags.client()
    engine = engine_flags.engine
    caps = check_engine_supports(engine, spec, raw=raw).capabilities
    if not caps.server_backends:
        raise UserError(
            f"engine '{engine}' picks its grammar backend when the server starts; a request cannot choose one, "
            "so there is no row per backend to compare on one server",
            hint=f"compare local backends (drop --engine), or start one {engine} server per backend and run "
            f"`sgcli generate --engine {engine} --base-url URL` against each ({caps.notes})",
        )
    raise AssertionError(f"{engine} declares per-request backends but compare-backends has no rows for them")


@co.takes_constraint(guarantee=True)
@eo.takes_engine(only=("engine", "base_url"))
@mo.takes_prompt()
@mo.takes_sampling(defaults={"max_tokens": 128})
@mo.takes_model()
def compare_backends(
    prompt: Annotated[Optional[str], typer.Argument(help="The prompt (not needed with --no-generate).")] = None,
    backends_opt: Annotated[
        Optional[list[bo.SeveralBackends]],
        bo.backends_option(
            "A backend to compare. Default ('all' = 'auto'): every installed backend that supports the constraint.",
            envvar=False,
        ),
    ] = None,
    backends_csv: Annotated[
        Optional[str],
        typer.Option(
            "--backends",
            metavar="A,B",
            callback=bo.comma_names,
            help="Older spelling of --backend: names, comma-separated.",
        ),
    ] = None,
    whitespace: Annotated[
        Optional[str],
        typer.Option(
            "--whitespace",
            help="JSON layout variants to compare, e.g. flexible,compact,indent=2,max-whitespace=4.",
            rich_help_panel="JSON layout",
        ),
    ] = None,
    no_generate: Annotated[
        bool, typer.Option("--no-generate", help="Compile and time masks only; no model is loaded.")
    ] = False,
    text: Annotated[
        Optional[str], typer.Option("--text", help="With --no-generate: walk the masks along this sample output.")
    ] = None,
    tokenizer_ref: Annotated[
        Optional[str],
        typer.Option(
            "--tokenizer", help="Tokenizer for --no-generate (model ref, tokenizer.json, .gguf). Default: --model's."
        ),
    ] = None,
    model_flags: mo.ModelFlags = None,
    sampling: mo.SamplingFlags = None,
    prompt_flags: mo.PromptFlags = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    engine_flags: eo.EngineFlags = None,
    flags: co.ConstraintFlags = None,
) -> None:
    """Run one constraint through several backends and compare compile time, mask time and output.

    Exit codes: 0 every row ran and is valid (or, with --no-generate, compiled and
    accepted --text), 1 some row failed, 2 bad input or flags.
    """
    spec = flags.spec()
    _check_flags(spec, prompt, whitespace=whitespace, no_generate=no_generate, text=text)
    sampling.check()
    prompt_flags.check()
    model_flags.check()
    if not engine_flags.local:
        _server_side_backends(engine_flags, spec, prompt_flags.raw)
    variants = parse_variants(whitespace, spec.json_options)
    names = pick_backends([*(backends_opt or []), *(backends_csv or [])], spec)
    if not flags.allow_unenforced:
        refuse_unenforced(spec, names)
    if no_generate:
        from sgcli.tokenizers import load_tokenizer

        vocab = (load_tokenizer(tokenizer_ref) if tokenizer_ref is not None else model_flags.tokenizer()).vocab
        rows = _compare_masks(spec, names, variants, vocab, text)
    else:
        if tokenizer_ref is not None:
            raise UserError("--tokenizer is for --no-generate; a generation uses the model's own tokenizer")
        rows = _compare_generations(spec, names, variants, prompt, model_flags, sampling, prompt_flags)
    _report(rows, output_format_of(output_format, json_out, stream=True), no_generate=no_generate)


def _check_flags(spec, prompt, *, whitespace, no_generate: bool, text) -> None:
    """Flag combinations that make no sense, refused before anything loads."""
    if whitespace and spec.kind is not Kind.JSON_SCHEMA:
        raise UserError(
            f"--whitespace compares JSON layouts; this constraint is {spec.kind.label}",
            hint="drop --whitespace, or use --schema",
        )
    if text is not None and not no_generate:
        raise UserError("--text is for --no-generate", hint="add --no-generate, or drop --text")
    if not no_generate and prompt is None:
        raise UserError(
            "no prompt given", hint='sgcli compare-backends --schema s.json "your prompt", or --no-generate'
        )


def _report(rows: list[dict], fmt: str, *, no_generate: bool) -> None:
    """Rows to stdout (a table, JSON or JSONL), the summary to stderr, and the exit code."""
    failed = any(r["error"] and not r["skipped"] or r["valid"] is False for r in rows)
    if fmt == "text":
        _table(rows, no_generate)
    else:
        writer = JsonRows(fmt)
        for row in rows:
            writer.write(row)
        writer.close()
    _summary(rows)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def _compare_masks(spec, names, variants, vocab, text) -> list[dict]:

    rows: list[dict] = []
    for row, compiled in _each_compiled(spec, names, variants, vocab, rows):
        walk = walk_masks(compiled, text)
        row.update(
            mask_ms_p50=percentile(walk["mask_ms"], 0.5, 4),
            mask_ms_p99=percentile(walk["mask_ms"], 0.99, 4),
            tokens=walk["steps"] - 1,
            valid=walk["accepted"],
            allowed_first=walk["allowed_first"],
            rejected_at_token=walk["rejected_at_token"],
            mask_digests=walk["digests"],
        )
    _mark_agreement(rows, "mask_digests")
    for r in rows:
        r.pop("mask_digests", None)
    return rows


def _compare_generations(
    spec, names, variants, prompt, model: mo.ModelFlags, sampling: mo.SamplingFlags, prompting: mo.PromptFlags
) -> list[dict]:
    from sgcli.cli.progress import stage_progress
    from sgcli.engine.session import Done, Request

    ref = model.ref()
    with stage_progress(f"loading {ref.display}") as progress:
        tokenizer = model.tokenizer(progress=lambda t: progress(t, 0, 3))
        lm = model.load(ref, progress)
    vocab = tokenizer.vocab.padded(lm.logits_width)
    rows: list[dict] = []
    for row, compiled in _each_compiled(spec, names, variants, vocab, rows):
        session = mo.new_session(lm, tokenizer, compiled, sampling, prompting)
        record = next(e.record for e in session.stream(Request(None, prompt)) if isinstance(e, Done))
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


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "[green]yes[/]" if value else "[red]no[/]"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(rows: list[dict], no_generate: bool) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        caption="times in ms; p50/p99: mask time "
        "per token" + ("; allowed: tokens allowed first" if no_generate else ""),
        caption_justify="left",
    )
    variants = len({r["variant"] for r in rows}) > 1
    cols = ["backend"] + (["variant"] if variants else []) + ["compile", "p50", "p99"]
    cols += (
        ["steps", "allowed", "ok", "agree"]
        if no_generate
        else ["tokens", "tok/s", "finish", "valid", "agree", "output"]
    )
    for c in cols:
        table.add_column(c, overflow="fold", no_wrap=c != "output", min_width=10 if c == "output" else None)
    notes = []
    for r in rows:
        cells = [r["backend"]] + ([r["variant"]] if variants else [])
        if r["error"]:  # the status goes where the compile time would be; the message below the table
            notes.append(f"({len(notes) + 1}) {r['backend']} {r['variant']}: {r['error']}")
            status = "[yellow]skip[/]" if r["skipped"] else "[red]error[/]"
            cells += [f"{status} ({len(notes)})"] + ["-"] * (len(cols) - len(cells) - 1)
            table.add_row(*cells)
            continue
        cells += [_fmt(r["compile_ms"]), _fmt(r["mask_ms_p50"], 3), _fmt(r["mask_ms_p99"], 3)]
        if no_generate:
            cells += [_fmt(r["tokens"]), _fmt(r.get("allowed_first")), _fmt(r["valid"]), _fmt(r["agree"])]
        else:
            output = r["output"] if len(r["output"]) <= 60 else r["output"][:57] + "..."
            cells += [
                _fmt(r["tokens"]),
                _fmt(r["tokens_per_s"], 1),
                _fmt(r["finish_reason"]),
                _fmt(r["valid"]),
                _fmt(r["agree"]),
                escape(output),
            ]
        table.add_row(*cells)
    out.print(table)
    for note in notes:
        out.print(escape(note))


def _summary(rows: list[dict]) -> None:
    from rich.markup import escape

    for r in rows:
        for w in r["warnings"]:
            err.print(f"[yellow]warning[/]: {r['backend']} ({r['variant']}): {escape(w)}")
    for variant in dict.fromkeys(r["variant"] for r in rows):
        ran = [r for r in rows if r["variant"] == variant and r["agree"] is not None]
        if len(ran) < 2:
            continue
        differ = [r["backend"] for r in ran if not r["agree"]]
        if differ:
            err.print(f"[yellow]differ[/] ({escape(variant)}): {', '.join(differ)} vs {ran[0]['backend']}")
        else:
            err.print(f"agree ({escape(variant)}): {', '.join(r['backend'] for r in ran)}")
