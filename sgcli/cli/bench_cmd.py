"""`sgcli bench`: compile and mask timings per backend on the user's own schemas and grammars."""

from __future__ import annotations

import contextlib
from typing import Annotated, Optional

import typer

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.app.model import ModelOptions
from sgcli.backends.bounded import each_on_its_own
from sgcli.backends.matching import select_backends
from sgcli.batch.sampling import SamplingParams
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli import model_options as mo
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, err, loading_note, out, output_format_of
from sgcli.cli.tables import print_table
from sgcli.engine import checkpoint
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UserError, plural
from sgcli.extras import require
from sgcli.grammar_dev import bench as core
from sgcli.tokenizers import load_tokenizer

EXAMPLES = """
Examples:

  sgcli bench sgcli/grammars --backend all

  sgcli bench schema.json                     # one file: its NAME.test.yaml cases, or instances built from it

  sgcli bench items.jsonl --backend llguidance --tokenizer HuggingFaceTB/SmolLM2-135M-Instruct

  sgcli bench schemas/ --json --plot bench.svg
"""


PathArg = Annotated[
    str,
    typer.Argument(
        metavar="FILE|DIR|FILE.jsonl",
        help='A schema or grammar file, a folder of them (kind from extension), or JSONL lines {"schema": {...}, '
        '"instances": [...]} / {"grammar": "...", "kind": "...", "instances": [...]}.',
    ),
]
BackendsOpt = Annotated[
    Optional[list[bo.SeveralBackends]],
    bo.backends_option("A backend, or 'all' (= 'auto', the default): every grammar backend."),
]
PlotOpt = Annotated[
    Optional[str],
    typer.Option("--plot", metavar="FILE.png|svg", help="Draw per-backend compile and mask time distributions."),
]
GenerateOpt = Annotated[
    bool, typer.Option("--generate", help="Also generate with a model: tokens/s with and without jump-forward.")
]
GenerateItemsOpt = Annotated[
    int, typer.Option("--generate-items", help="How many compiled items per backend to generate for.")
]


@mo.takes_sampling(only=("max_tokens",), defaults={"max_tokens": 64})
@mo.takes_model()
def bench(
    path: PathArg,
    backend: BackendsOpt = None,
    tokenizer: co.TokenizerOpt = None,
    plot: PlotOpt = None,
    generate: GenerateOpt = False,
    model_flags: ModelOptions = None,
    sampling: SamplingParams = None,
    generate_items: GenerateItemsOpt = 3,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
) -> None:
    """Measure each backend on your schemas and grammars, MaskBench-style.

    Per backend: items compiled and failed (by reason), compile ms p50/p99 cold and
    loaded from the on-disk cache (cacheable backends), and mask ms p50/p99/max over the
    tokens of each item's valid instances: given in the JSONL, the accepted cases of a
    sibling NAME.test.yaml, or built from the schema. Timings are wall clock on this
    machine: compare backends within one run, not across machines.

    Exit codes: 0 measured, 1 an item failed to compile or a valid instance was
    rejected, 2 bad input or usage (a file of a folder or a JSONL line that cannot be read is
    reported as an input error and the rest is measured; so is an instance that sgcli's own
    check, the one generate's outputs get, finds invalid), or a compile limit was hit (see
    --compile-timeout), or no chosen backend can run any item (unsupported or not installed;
    checked before anything loads).
    """

    fmt = output_format_of(output_format, json_out, stream=True)
    if plot is not None:
        core.check_plot_path(plot)  # before anything slow: a bad path or missing matplotlib exits 2 now
    max_tokens = sampling.max_tokens
    _check_generate(generate, model_flags, max_tokens, generate_items, tokenizer)
    names = select_backends(backend)
    items = core.load_items(path)
    core.check_something_to_measure(items, names)  # before a model loads
    lm = None
    if generate:
        lm, tok = _load_model(model_flags)
        checkpoint.check_logits_fit(lm, checkpoint.text_tokens(tok.vocab))
        vocab = tok.vocab.padded(lm.logits_width)
    else:
        vocab = load_tokenizer(tokenizer, progress=loading_note).vocab
    writer = JsonRows(fmt) if fmt != "text" else None
    with _progress(names, items, writer) as on_item, each_on_its_own(len(items) * len(names) > 1):
        results = core.run(items, names, vocab, on_item)
    if lm is not None:
        core.generate(results, items, lm, tok, max_tokens=max_tokens, n_items=generate_items)
    summaries = [core.summary(r) for r in results]
    if writer is not None:
        _write_summaries(writer, summaries)
    else:
        _show(results, summaries, len(items))
    if plot is not None:
        core.plot(results, plot)
        err.print(f"plot written to {plot}")
    if any(r.get("limit") or r.get("reason") == "input error" for res in results for r in res.items):
        raise typer.Exit(EXIT_USAGE)  # a compile limit is the user's to raise, as in `sgcli compile`; bad input
    failed = any(r.get("reason") == "compile error" for res in results for r in res.items)
    rejected = any(s["instances_rejected"] for s in summaries)
    raise typer.Exit(EXIT_FINDINGS if failed or rejected else EXIT_OK)


def _check_generate(generate: bool, model_flags: ModelOptions, max_tokens: int, generate_items: int, tokenizer) -> None:
    """The model flags belong to --generate, and --generate to the model's own tokenizer: exit 2 before loading."""
    given = [f for f, v in {"--model": model_flags.model, **model_flags.local_only()}.items() if v]
    if given and not generate:
        raise UserError(f"{given[0]} is only used with --generate", hint=f"add --generate, or drop {given[0]}")
    if generate:
        model_flags.check()
    if generate and (max_tokens < 1 or generate_items < 1):
        raise UserError("--max-tokens and --generate-items must be 1 or more")
    if generate and tokenizer is not None:
        raise UserError("--generate uses the model's own tokenizer", hint="drop --tokenizer, or pick it with --model")


_HEAD = {"schema_version": RECORD_SCHEMA_VERSION}  # sgcli/records/ BenchItem, BenchBackend


@contextlib.contextmanager
def _progress(names: list[str], items, writer: JsonRows | None):
    """Per item: the progress bar (or a line now and then off a terminal), and its record written at
    once (JSON Lines flush each one: a long run's finished items reach the pipe as they finish)."""
    from sgcli.cli.progress import item_progress

    with item_progress("bench", len(names) * len(items)) as update:

        def on_item(backend: str, name: str, record: dict | None) -> None:
            update(f"{backend} · {name}", record is not None)
            if record is not None and writer is not None:
                writer.write(_HEAD | {"type": "item"} | record)

        yield on_item


def _write_summaries(writer: JsonRows, summaries: list[dict]) -> None:
    for s in summaries:
        writer.write(_HEAD | {"type": "backend"} | s)
    writer.close()


def _load_model(model: ModelOptions):
    from sgcli.cli.progress import stage_progress

    require("generate", "--generate")
    ref = model.ref()
    with stage_progress(f"loading {ref.display}") as progress:
        tok = model.tokenizer(progress=lambda t: progress(t, 0, 3))
        lm = model.load(ref, progress)
    return lm, tok


def _num(v) -> str:
    return "-" if v is None else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _of(stats: dict) -> str:
    """How many values a p50/p99 cell stands on: the p99 of 3 compiles is their largest, not a tail."""
    return f" (n={stats['n']})" if stats["n"] else ""


def _mask_ms(v) -> str:
    """A mask time in ms (the unit of every time sgcli prints), to the microsecond: 0.012."""
    return "-" if v is None else f"{v:.3f}"


def _show(results, summaries: list[dict], n_items: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"sgcli bench · {plural(n_items, 'item')}", title_justify="left")
    for col in ("backend", "compiled", "failed", "cold ms p50/p99", "cached ms p50/p99", "mask ms p50/p99/max"):
        table.add_column(col, justify="left" if col in ("backend", "failed") else "right")
    table.add_column("instances", justify="right")
    for s in summaries:
        failed = ", ".join(f"{n} {reason}" for reason, n in s["failed_by_reason"].items()) or "0"
        cold, cached, mask = s["compile_cold_ms"], s["compile_cached_ms"], s["mask_ms"]
        walked = f"{s['instances_walked']}" + (
            f" ([red]{s['instances_rejected']} rejected[/])" if s["instances_rejected"] else ""
        )
        table.add_row(
            s["backend"],
            str(s["compiled"]),
            failed,
            f"{_num(cold['p50'])} / {_num(cold['p99'])}{_of(cold)}",
            f"{_num(cached['p50'])} / {_num(cached['p99'])}{_of(cached)}",
            " / ".join(_mask_ms(mask[k]) for k in ("p50", "p99", "max")) + _of(mask),
            walked,
        )
    print_table(table)
    for res in results:  # details as plain lines: greppable, never wrapped inside a cell
        for r in res.items:
            if r["status"] == "failed":
                where, message = _located(r["item"], r["message"])
                out.print(f"{escape(where)}: {r['backend']}: {r['reason']}: {escape(message)}")
            for rej in r.get("rejected", []):
                out.print(f"{escape(rej['where'])} rejected at token {rej['rejected_at_token']} by {r['backend']}")
    for s in summaries:
        g = s.get("generation")
        if g:
            jf = g["tokens_per_s_jump_forward"]
            out.print(
                f"{s['backend']}: generate {plural(g['items'], 'item')}, ≤{plural(g['max_tokens'], 'token')}: "
                f"{_num(g['tokens_per_s'])} tokens/s; with jump-forward: {_num(jf)}"
                + (f" ({g['note']})" if g.get("note") else "")
            )
    if any(s["compile_cached_ms"]["n"] == 0 and s["compiled"] for s in summaries):
        out.print("cached: '-' where the backend has no on-disk cache (or --no-cache)")


def _located(item: str, message: str) -> tuple[str, str]:
    """Where a failure is and what it says, its location said once: a message that starts at the
    item's own place (`dir/items.jsonl:1:1: ...` for the item `items.jsonl:1`) gives the place."""
    import re

    place = re.match(r"(.+?)((?::\d+)+): ", message)
    name, line = re.fullmatch(r"(.+?)((?::\d+)*)", item).groups()
    same_file = place and (place[1] == name or place[1].endswith(("/" + name, "\\" + name)))
    if same_file and (place[2] + ":").startswith(line + ":"):
        return message[: place.end() - 2], message[place.end() :]
    return item, message
