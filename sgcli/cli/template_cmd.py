"""`sgcli template render`: the prompt a chat becomes, exactly as `generate` sends it."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from sgcli.app.model import ModelOptions
from sgcli.cli import model_options as mo
from sgcli.cli.coercion import Command, Group
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, err, handles_errors, json_line, output_format_of
from sgcli.constraints.reading import read_text
from sgcli.constraints.spec import parse_json
from sgcli.errors import EXIT_OK, Location, UserError
from sgcli.tokenizers import load_tokenizer
from sgcli.tokenizers.templates import check_messages, check_tools

app = typer.Typer(help="Render chat templates.", no_args_is_help=True, cls=Group)

EXAMPLES = """
Examples:

  sgcli template render --messages chat.json

  sgcli template render --tokenizer ./my-model --messages chat.json --template-name tool_use --tokens

  echo '[{"role": "user", "content": "Hi"}]' | sgcli template render --messages - --json
"""


def read_messages(path: str) -> tuple[list[dict], list | None]:
    """Messages (and tools) from a JSON file: a list of messages, or {"messages": [...], "tools": [...]}."""

    text, origin = read_text(path, what="messages file")
    try:
        data = parse_json(text, origin)  # NaN, 1e999 and nesting past the limit too, at line:col
    except UserError as exc:
        raise UserError(
            f"messages file is not valid JSON: {exc.message.removeprefix('invalid JSON: ')}", location=exc.location
        ) from None
    tools = None
    if isinstance(data, dict):
        if "messages" not in data:
            raise UserError(
                "messages file is an object without 'messages'",
                location=Location(origin),
                hint='give a list of messages, or {"messages": [...], "tools": [...]}',
            )
        tools = data.get("tools")
        data = data["messages"]
    try:
        return check_messages(data), None if tools is None else check_tools(tools)
    except UserError as exc:
        raise UserError(exc.message, location=Location(origin), hint=exc.hint) from None


@handles_errors
@mo.takes_prompt(only=("template_name", "chat_template_kwargs"))
@mo.takes_model(only=("model", "revision", "gguf_file"))
def render(
    messages: Annotated[str, typer.Option("--messages", help="JSON file of messages ('-' = stdin).")],
    model_flags: ModelOptions = None,
    tokenizer: Annotated[
        Optional[str],
        typer.Option("--tokenizer", help="A tokenizer instead of a model (same forms as `sgcli tokenizer inspect`)."),
    ] = None,
    prompt_flags: mo.PromptFlags = None,
    add_generation_prompt: Annotated[
        bool,
        typer.Option(
            "--add-generation-prompt/--no-add-generation-prompt", help="End with the assistant's turn opener."
        ),
    ] = True,
    tokens: Annotated[bool, typer.Option("--tokens", help="Also print the prompt's token ids.")] = False,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
) -> None:
    """Print the prompt rendered from a chat, with the renderer `generate` uses.

    Which template was used (and why) goes to stderr. Exit 2 when the template
    rejects the messages or cannot be rendered.
    """
    if model_flags.model is not None and tokenizer is not None:
        raise UserError("give --model or --tokenizer, not both")
    kwargs = prompt_flags.template_kwargs()  # bad JSON: exit 2 before anything loads
    msgs, tools = read_messages(messages)
    tok = load_tokenizer(None if tokenizer == "default" else tokenizer) if tokenizer else model_flags.tokenizer()
    rendered = tok.render_prompt(
        msgs,
        template_name=prompt_flags.template_name,
        add_generation_prompt=add_generation_prompt,
        tools=tools,
        template_kwargs=kwargs,
    )
    tpl = rendered.template
    if tpl is not None:
        err.print(f"[dim]template[/]: {tpl.name} — {tpl.how_chosen}", highlight=False)
    for notice in rendered.notices:
        err.print(f"[cyan]note[/]: {notice}", highlight=False)
    for warning in rendered.warnings:
        err.print(f"[yellow]warning[/]: {warning}", highlight=False)
    if output_format_of(output_format, json_out) != "text":
        from sgcli import RECORD_SCHEMA_VERSION

        record = {  # sgcli/records/ RenderedPrompt
            "schema_version": RECORD_SCHEMA_VERSION,
            "tokenizer": tok.name,
            "template": tpl.name if tpl else None,
            "how_chosen": tpl.how_chosen if tpl else None,
            "prompt": rendered.text,
            "num_tokens": len(rendered.ids),
        }
        if tokens:
            record["ids"] = rendered.ids
        json_line(record)
    else:
        sys.stdout.write(rendered.text)
        if tokens:
            sys.stdout.write(("" if rendered.text.endswith("\n") else "\n") + " ".join(map(str, rendered.ids)) + "\n")
        sys.stdout.flush()
    raise typer.Exit(EXIT_OK)


app.command("render", epilog=EXAMPLES, cls=Command)(render)
