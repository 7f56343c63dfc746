"""`sgcli generate`: the flags parsed into one `GenerateRequest`, run by `sgcli.app.generate`.

The local and the server path get the same request, writer, summary and exit codes; this
module only reads flags, the prompt and the --input file, and refuses bad combinations
before anything slow.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from sgcli import backends
from sgcli.app.generate import run_generate
from sgcli.app.model import ModelOptions
from sgcli.app.request import GenerateRequest, LocalOptions, ServerOptions
from sgcli.batch.requests import (
    PROMPT_LIMIT_FLAG,
    read_input,
)
from sgcli.batch.sampling import SamplingParams
from sgcli.bounds import check_setting
from sgcli.cli import constraint_options as co
from sgcli.cli import engine_options as eo
from sgcli.cli import model_options as mo
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, output_format_of, utf8_text
from sgcli.cli.flag_groups import takes
from sgcli.cli.report import Terminal
from sgcli.constraints.reading import read_text
from sgcli.errors import UserError
from sgcli.limits import DEFAULT_MAX_PROMPT_BYTES
from sgcli.lint import preflight

DEFAULT_BATCH_SIZE = 32  # measured: benchmarks/batch_throughput.py, docs/performance.md "Batch" (Run 5)

EXAMPLES = """
Examples:

  sgcli generate --schema examples/capital.json "What is the capital of France?"

  sgcli generate --json --regex '(Paris|London)' "Capital of France?"

  sgcli generate --choice yes --choice no "Is water wet?"

  sgcli generate --schema s.json --input prompts.jsonl --output results.jsonl

  echo '{"type":"integer","minimum":0,"maximum":100}' | sgcli generate --schema - "Pick a number"
"""

PromptArg = Annotated[
    Optional[str], typer.Argument(help="The prompt ('-' reads stdin). Omit with --input.", callback=utf8_text)
]
ReasoningOpt = Annotated[
    bool,
    typer.Option(
        "--reasoning",
        help="Let a reasoning model think freely; constrain only the answer after --think-end.",
        rich_help_panel="Prompt",
    ),
]
ThinkEndOpt = Annotated[
    str, typer.Option("--think-end", help="End-of-thinking marker for --reasoning.", rich_help_panel="Prompt")
]
ThinkBudgetOpt = Annotated[
    Optional[int],
    typer.Option(
        "--think-budget",
        help="With --reasoning: after this many thinking tokens (or where the model stops while thinking), "
        "force the end-of-thinking marker.",
        rich_help_panel="Prompt",
    ),
]
JumpForwardOpt = Annotated[
    bool,
    typer.Option(
        "--jump-forward/--no-jump-forward",
        help="Append text the grammar forces in one forward pass (same output, fewer passes).",
        rich_help_panel="Sampling",
    ),
]
InputOpt = Annotated[
    Optional[str],
    typer.Option(
        "--input",
        "-i",
        help="JSONL of {id, prompt} or {id, messages}, each with optional tools ('-' = stdin).",
        rich_help_panel="Output",
    ),
]
BatchSizeOpt = Annotated[
    Optional[int],
    typer.Option(
        "--batch-size",
        help=f"Decode this many --input requests together (continuous batching; default {DEFAULT_BATCH_SIZE}). "
        "1 = one after another. Batched rows feed tokens the grammar forces with the token before them "
        "(jump-forward without drafts).",
        rich_help_panel="Output",
    ),
]
OutputOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--output",
        "-o",
        help="Write here what stdout would get ('-': stdout): a batch's records, a single prompt's text "
        "(its record with --json).",
        rich_help_panel="Output",
        callback=lambda value: None if value is not None and str(value) == "-" else value,  # not a file named '-'
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No summary line on stderr.", rich_help_panel="Output")]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="With --input and --output: skip ids already in the output, append the rest.",
        rich_help_panel="Output",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Overwrite a non-empty --output (without it, or --resume, an existing output is exit 2).",
        rich_help_panel="Output",
    ),
]
MaxPromptBytesOpt = Annotated[
    int,
    typer.Option(
        PROMPT_LIMIT_FLAG,
        envvar="SGCLI_MAX_PROMPT_BYTES",
        help="Longest --input line (or prompt on stdin) accepted, in bytes: a longer line gets an error record "
        "(a prompt, exit 2); 0 = no limit.",
        rich_help_panel="Limits and cache",
    ),
]


@dataclass
class DecodingFlags:
    """How the in-process model decodes: reasoning mode and jump-forward."""

    reasoning: bool = False
    think_end: str = "</think>"
    think_budget: int | None = None
    jump_forward: bool = True

    def check(self) -> None:
        if not self.think_end:
            raise UserError("--think-end must not be empty")
        if self.think_budget is not None and (self.think_budget < 0 or not self.reasoning):
            raise UserError(
                "--think-budget must be 0 or more" if self.think_budget < 0 else "--think-budget needs --reasoning",
                hint="sgcli generate --reasoning --think-budget 64 ...",
            )

    @property
    def marker(self) -> str | None:
        """The end-of-thinking marker the answer's constraint starts after (reasoning mode only)."""
        return self.think_end if self.reasoning else None


DECODING_FLAGS = {
    "reasoning": (ReasoningOpt, False),
    "think_end": (ThinkEndOpt, "</think>"),
    "think_budget": (ThinkBudgetOpt, None),
    "jump_forward": (JumpForwardOpt, True),
}


@dataclass
class BatchFlags:
    """--input batches, and where records (or a single prompt's text) go."""

    input_file: str | None = None
    batch_size: int | None = None
    output: Path | None = None
    quiet: bool = False
    resume: bool = False
    force: bool = False
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES

    def check(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise UserError("--batch-size must be at least 1")
        if self.batch_size is not None and self.input_file is None:
            raise UserError("--batch-size needs --input", hint="sgcli generate --input prompts.jsonl --batch-size 8")


BATCH_FLAGS = {
    "input_file": (InputOpt, None),
    "batch_size": (BatchSizeOpt, None),
    "output": (OutputOpt, None),
    "quiet": (QuietOpt, False),
    "resume": (ResumeOpt, False),
    "force": (ForceOpt, False),
    "max_prompt_bytes": (MaxPromptBytesOpt, DEFAULT_MAX_PROMPT_BYTES),
}


def _server_backend(engine: str, backend: str) -> str:
    """The backend a server run asks for. One given on the command line that the engine cannot take is
    exit 2; one from sgcli.toml or SGCLI_BACKEND (set for local runs) does not apply to a server that
    picks its own: a note says so and the run goes on with auto."""
    from sgcli.cli.backend_options import Configured
    from sgcli.cli.common import err
    from sgcli.serving import refuse_backend_choice

    try:
        refuse_backend_choice(
            engine,
            backend,
            why=f"so --backend {backend} would be ignored",
            hint="drop --backend (or give auto) and choose the backend where the server starts",
        )
    except UserError:
        if not isinstance(backend, Configured):
            raise
        err.print(f"note: {backend.source} ({backend}) is not sent to engine '{engine}', which picks its backend")
        return backends.DEFAULT_BACKEND
    return backend


@co.takes_constraint(guarantee=True)
@eo.takes_engine()
@takes("batch_flags", BatchFlags, BATCH_FLAGS)
@takes("decoding", DecodingFlags, DECODING_FLAGS)
@mo.takes_prompt()
@mo.takes_sampling()
@mo.takes_model()
def generate(
    prompt: PromptArg = None,
    backend: co.BackendOpt = None,
    model_flags: ModelOptions = None,
    sampling: SamplingParams = None,
    prompt_flags: mo.PromptFlags = None,
    decoding: DecodingFlags = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    batch_flags: BatchFlags = None,
    engine_flags: eo.EngineFlags = None,
    flags: co.ConstraintFlags = None,
) -> None:
    """Generate text that is guaranteed to match a constraint, then validate it.

    Every output is re-checked by an independent checker (jsonschema, lark, regex, ...);
    the record's validated_by says which. valid is null ("unchecked", with the reason)
    when no independent checker can read the constraint: that is not a success claim.
    Exit codes: 0 no output invalid, 1 some output invalid (e.g. cut off by
    --max-tokens), 2 bad input or flags, 3 internal error. Batch records (--input) are
    always JSON Lines, one per request, in input order.
    """
    # A single prompt prints its record (json or jsonl: one object either way) or its text.
    json_out = output_format_of(output_format, json_out, stream=True) != "text"
    backend = backend or backends.DEFAULT_BACKEND
    flags.one_stdin({"--input": batch_flags.input_file, "the prompt": prompt})
    engine_flags.check()
    if not engine_flags.local:
        flags.for_server()
        if backend != backends.DEFAULT_BACKEND:  # the request would carry no backend: refused, not ignored
            backend = _server_backend(engine_flags.engine, backend)
    spec = flags.spec(required=backends.enforces(backend))
    if not engine_flags.local:
        _regex_readable(spec)
    spec = spec.for_generation()
    preflight.structure_errors(spec)  # an undefined rule fails here, before any library loads
    for group in (decoding, sampling, prompt_flags, model_flags, batch_flags):
        group.check()
    prompt, batch = _inputs(prompt, batch_flags, flags)
    bundled = spec.source_map.origins() if spec.source_map else []  # the schema's own file, then its $refs'
    inputs = [("--input", batch_flags.input_file), ("the constraint", spec.origin)]
    _output_is_not_an_input(batch_flags.output, inputs + [("a file the schema's $ref reads", p) for p in bundled])
    if batch_flags.output is None:
        _stdout_is_open()
    request = GenerateRequest(
        spec,
        prompt,
        batch,
        output=batch_flags.output,
        resume=batch_flags.resume,
        force=batch_flags.force,
        json_out=json_out,
        batch_size=batch_flags.batch_size or DEFAULT_BATCH_SIZE,
        sampling=sampling,
        prompt_options=prompt_flags.options(),
        **_runs_on(engine_flags, backend, model_flags, prompt_flags, decoding, flags.allow_unenforced),
    )
    raise typer.Exit(run_generate(request, Terminal(quiet=batch_flags.quiet)))


def _stdout_is_open() -> None:
    """Records going to stdout need one: `>&-` is exit 2 before anything loads (`cli.streams`)."""
    if sys.stdout is None or getattr(sys.stdout, "closed_at_start", False):
        raise UserError("stdout is closed, so the records have nowhere to go", hint="pass -o FILE")


def _inputs(prompt: str | None, io: BatchFlags, flags: co.ConstraintFlags) -> tuple[str | None, tuple | None]:
    """The prompt, or the --input file's lines: read (bounded) before the slow work, so a typo fails in
    milliseconds."""
    if (prompt is None) == (io.input_file is None):
        raise UserError(
            "give a prompt or --input FILE (not both)" if prompt is not None else "no prompt given",
            hint='sgcli generate --schema s.json "your prompt", or --input prompts.jsonl',
        )
    check_setting("max-prompt-bytes", io.max_prompt_bytes)
    if prompt == "-":
        prompt = read_text("-", what="prompt", limit=io.max_prompt_bytes, flag=PROMPT_LIMIT_FLAG)[0]
        if not prompt.strip():  # an upstream step of a pipeline that wrote nothing: not a prompt to answer
            raise UserError("the prompt read from stdin is empty", hint="pipe the prompt in, or give it as an argument")
    batch = read_input(io.input_file, io.max_prompt_bytes) if io.input_file is not None else None
    if io.resume and batch is None:
        raise UserError("--resume is for batches", hint="use --resume with --input FILE --output FILE")
    return prompt, batch


def _regex_readable(spec) -> None:
    """A server gets the regex as it is, and no local backend compiles it first: one that neither
    sgcli's reader nor the `regex` package (in either backend dialect) can read is malformed, exit 2
    here, instead of an output nothing could check (`valid: null`, exit 0)."""
    from sgcli.constraints.regex_dialects import ECMA, RUST, DialectError, compiled
    from sgcli.constraints.spec import Kind
    from sgcli.dialects.grammar_model import ParseError
    from sgcli.dialects.regex_parse import parse_regex
    from sgcli.errors import Location

    if spec.kind is not Kind.REGEX:
        return
    try:
        parse_regex(spec.text)
        return
    except ParseError as exc:
        ours = exc
    except RecursionError:  # nesting past the reader's depth was refused before; stay safe
        return
    theirs = ""
    for dialect in (RUST, ECMA):
        try:
            compiled(spec.text, dialect)
            return
        except DialectError as exc:
            theirs = str(exc)
    origin = spec.origin if spec.origin not in (None, "--regex") else "--regex"
    raise UserError(
        f"the regex cannot be read: {ours.message} (the regex package: {theirs})",
        location=Location(origin, 1, ours.pos + 1),
        hint="fix the regex; a server would reject it or answer with output nothing can check",
    )


def _output_is_not_an_input(output: Path | None, inputs: list[tuple[str, str | None]]) -> None:
    """--output naming a file the run reads: --force (or the first record) would replace it."""
    if output is None:
        return
    for flag, path in inputs:
        if path and path != "-" and _same_file(output, path):
            raise UserError(
                f"--output {output} is {flag} ({path}): writing records there would overwrite what this run reads",
                hint="choose another --output file",
            )


def _same_file(a: Path, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either one missing (a new output), or unreadable: not the same file
        return False


def _runs_on(
    engine: eo.EngineFlags, backend: str, model: ModelOptions, prompting: mo.PromptFlags, decoding, allow: bool
) -> dict:
    """`local=` the in-process model's options, or `server=` the engine's (refusing local-only flags)."""
    if engine.local:
        options = LocalOptions(model, backend, decoding.marker, decoding.think_budget, decoding.jump_forward, allow)
        return {"local": options}
    _reject_local_only(
        {
            "--reasoning": decoding.reasoning,
            "--template-name": prompting.template_name,
            "--chat-template-kwargs": prompting.chat_template_kwargs,
            **model.local_only(),
        }
    )
    return {"server": ServerOptions(engine.engine, engine.client(), engine.served_model, allow)}


def _reject_local_only(flags: dict[str, object]) -> None:
    """Flags that act on the in-process model have no meaning on a server: say so, don't ignore them."""
    for flag, given in flags.items():
        if given:
            raise UserError(
                f"{flag} applies to the local engine only",
                hint="the server's own settings decide this; drop the flag or use --engine local",
            )
