"""`sgcli tokenizer inspect --tokenizer T` and `sgcli tokenizer diff A B`: see the vocabulary a backend gets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.cli.coercion import Command, Group
from sgcli.cli.common import (
    TOKENIZER_HELP,
    JsonFlagOpt,
    OutputFormatOpt,
    escape,
    handles_errors,
    json_line,
    out,
    output_format_of,
    utf8_text,
)
from sgcli.cli.tables import print_table
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError, plural
from sgcli.tokenizers import load_tokenizer
from sgcli.tokenizers.inspect import diff_tokenizers, inspect_tokenizer

app = typer.Typer(help="Inspect and compare tokenizer vocabularies.", no_args_is_help=True, cls=Group)

TextOpt = Annotated[
    Optional[str], typer.Option("--text", help="Also show how this text is split into tokens.", callback=utf8_text)
]


def _load(ref: str):
    return load_tokenizer(None if ref == "default" else ref, flag=None)


def _ids_with_text(ids: list[int], texts: list[str]) -> str:
    return ", ".join(f"{i} {t}" for i, t in zip(ids, texts)) or "none"


@handles_errors
def inspect(
    positional: Annotated[
        Optional[str], typer.Argument(metavar="TOKENIZER", help="The same as --tokenizer (the older spelling).")
    ] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help=TOKENIZER_HELP)] = None,
    text: TextOpt = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
) -> None:
    """Size, type, special and stop tokens, collisions, reachable bytes, and a text's tokens.

    The tokenizer is --tokenizer, as in every other command (or the argument); without either, the
    embedded SmolLM2's.
    """
    if positional is not None and tokenizer is not None and positional != tokenizer:
        raise UserError(
            f"two tokenizers given: {positional} and --tokenizer {tokenizer}", hint="give one of them (--tokenizer)"
        )
    given = tokenizer if tokenizer is not None else positional
    report = inspect_tokenizer(_load("default" if given is None else given), text)
    if output_format_of(output_format, json_out) != "text":
        json_line({"schema_version": RECORD_SCHEMA_VERSION} | report)  # sgcli/records/
    else:
        _print_inspect(report)
    raise typer.Exit(EXIT_OK)


def _print_inspect(r: dict) -> None:
    specials = r["special"]["tokens"]
    shown = ", ".join(f"{t['text']} ({t['id']})" for t in specials[:8])
    more = f", … (+{len(specials) - 8})" if len(specials) > 8 else ""
    rows = [
        ("tokenizer", r["tokenizer"]),
        ("source", r["source"]),
        ("type", r["type"]),
        ("size", f"{r['size']} ids ({r['ordinary']} ordinary, {r['special']['count']} special)"),
        ("EOS / BOS", f"{r['eos_id']} / {r['bos_id']}"),
        ("stop ids", _ids_with_text(r["stop_ids"], r["stop_tokens"])),
        ("special", (shown + more) or "none"),
        ("prefix space", "yes (SentencePiece dummy prefix)" if r["add_prefix_space"] else "no"),
    ]
    bc, tc, rb = r["byte_collisions"], r["text_collisions"], r["reachable_bytes"]
    rows.append(
        (
            "byte collisions",
            "none: every ordinary id has distinct bytes"
            if not bc["groups"]
            else f"{bc['ids']} ids share bytes with another ({bc['groups']} groups)",
        )
    )
    rows.append(
        (
            "text collisions",
            "none"
            if not tc["groups"]
            else f"{tc['ids']} ids would collapse if keyed by decoded text ({tc['groups']} groups)",
        )
    )
    reach = f"{rb['count']}/256" + (
        ""
        if rb["all"]
        else " (missing " + " ".join(rb["missing"][:16]) + (" …" if len(rb["missing"]) > 16 else "") + ")"
    )
    rows.append(("reachable bytes", reach))
    if r["chat_template"]:
        rows.append(("chat templates", ", ".join(r["chat_template"]["names"])))
    else:
        rows.append(("chat templates", "none (raw prompts)"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.print(f"[bold]{key:<{width}}[/]  {escape(str(value))}")
    for note in [bc.get("note"), rb.get("note"), *r["notes"]]:
        if note:
            out.print(f"[cyan]note[/]: {escape(note)}")
    if "tokenization" in r:
        _print_tokens(r["tokenization"])


def _print_tokens(t: dict) -> None:
    from rich.table import Table

    if "error" in t:
        out.print(f"[red]{escape(t['error'])}[/]")
        return
    table = Table(title=f"{plural(len(t['ids']), 'token')} for {t['text']!r}", title_justify="left")
    for col in ("#", "id", "piece", "hex"):
        table.add_column(col, justify="right" if col in ("#", "id") else "left")
    for n, p in enumerate(t["pieces"]):
        table.add_row(str(n), str(p["id"]), escape(f"'{p['text']}'"), p["hex"])
    print_table(table)
    if not t["round_trip"]:
        out.print("[red]the tokens' bytes do not spell the text back[/]")


@handles_errors
def diff(
    a: Annotated[str, typer.Argument(help="First tokenizer. " + TOKENIZER_HELP)],
    b: Annotated[str, typer.Argument(help="Second tokenizer (same forms).")],
    text: TextOpt = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
) -> None:
    """Compare two sources of one tokenizer (e.g. a GGUF and a tokenizer.json). Exit 1 when they differ."""
    report = diff_tokenizers(_load(a), _load(b), text)
    if output_format_of(output_format, json_out) != "text":
        json_line({"schema_version": RECORD_SCHEMA_VERSION} | report)  # sgcli/records/
    else:
        _print_diff(report)
    raise typer.Exit(EXIT_OK if report["same"] else EXIT_FINDINGS)


def _print_diff(r: dict) -> None:
    out.print(f"a: {escape(r['a']['tokenizer'])} ({r['a']['size']} ids)")
    out.print(f"b: {escape(r['b']['tokenizer'])} ({r['b']['size']} ids)")
    if r["same"]:
        out.print("[green]same[/]: identical bytes, special ids, stop ids and settings")
        return
    for name, v in r["fields"].items():
        out.print(f"[yellow]{name}[/]: a={v['a']!r} b={v['b']!r}")
    if r["size_difference"]:
        more = r["size_difference"]
        out.print(f"[yellow]size[/]: b has {plural(abs(more), 'more id' if more > 0 else 'fewer id')}")
    d = r["differing_bytes"]
    if d["count"]:
        out.print(
            f"[yellow]bytes[/]: {d['count']} ids differ, e.g. "
            + escape("; ".join(f"{e['id']}: {e['a']!r} vs {e['b']!r}" for e in d["examples"]))
        )
    for side in ("a", "b"):
        only = r[f"special_only_in_{side}"]
        if only:
            out.print(f"[yellow]special only in {side}[/]: {only[:10]}{' …' if len(only) > 10 else ''}")
    t = r.get("tokenization")
    if t and not t["same"]:
        out.print(f"[yellow]tokenization of {escape(repr(t['text']))}[/]: a={t['a']} b={t['b']}")


app.command("inspect", cls=Command)(inspect)
app.command("diff", cls=Command)(diff)
