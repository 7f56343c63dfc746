"""The model, sampling and prompt flag groups, declared once for every command that runs a model.

Each group is a dataclass holding the flags as given, with the checks that belong to it (run
once, before anything slow). The model and sampling groups are the application layer's own
typed values (`sgcli.app.model.ModelOptions`, `sgcli.batch.sampling.SamplingParams`): only
their option declarations live here. Commands take a group with `takes_model()`,
`takes_sampling()`, `takes_prompt()` (see `flag_groups.takes`); `only=` and `defaults=` let a
command take a subset or its own defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Optional

import typer

from sgcli.app.model import ModelOptions
from sgcli.batch.requests import PromptOptions
from sgcli.batch.sampling import SamplingParams
from sgcli.cli.common import stop_strings, utf8_text
from sgcli.cli.flag_groups import takes
from sgcli.engine.flags import DEVICES, KERNELS, json_object, parse_device
from sgcli.errors import UserError


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class ModelImpl(str, Enum):
    auto = "auto"
    native = "native"
    transformers = "transformers"


Kernel = Enum("Kernel", {name.replace("-", "_"): name for name in KERNELS}, type=str)  # --kernel's choices


def device_option(value: str) -> str:
    """--device, read by the one device parser; a bad name is click's usage error (exit 2) listing them."""
    try:
        return parse_device(value)
    except UserError as exc:
        raise typer.BadParameter(exc.message) from None


_MODEL = "Model"
_SAMPLING = "Sampling"
_PROMPT = "Prompt"

ModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        envvar="SGCLI_MODEL",
        help="Hugging Face id, local folder, or .gguf file. Default: the embedded SmolLM2-135M-Instruct.",
        rich_help_panel=_MODEL,
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        envvar="SGCLI_DEVICE",
        parser=device_option,
        metavar="<auto|cpu|cuda|cuda:N|mps>",
        autocompletion=lambda: list(DEVICES),
        help="auto (CUDA if torch sees one, else CPU), cpu, cuda, cuda:N or mps.",
        rich_help_panel=_MODEL,
    ),
]
DtypeOpt = Annotated[
    Dtype,
    typer.Option(
        "--dtype",
        envvar="SGCLI_DTYPE",
        help="auto: the checkpoint's own dtype on a GPU, float32 on the CPU (the same outputs on every CPU). "
        "bfloat16 on a CPU with bf16 units (AVX-512 BF16, AMX) runs oneDNN's packed kernel: faster, other outputs.",
        rich_help_panel=_MODEL,
    ),
]
ThreadsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        envvar="SGCLI_THREADS",
        help="torch CPU threads for the model. Default: the usable physical cores less those other work keeps "
        "busy, at most 8, followed through the run as other work comes and goes (OMP_NUM_THREADS where set "
        "pins it, as this flag does); the record's timings.threads says how many ran last.",
        rich_help_panel=_MODEL,
    ),
]
RevisionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--revision",
        metavar="REV",
        help="Branch, tag or commit of a hub model (its tokenizer and weights both).",
        rich_help_panel=_MODEL,
    ),
]
TrustOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Run the model repository's own Python code (models whose config has an auto_map). "
        "It runs with your permissions: read it first.",
        rich_help_panel=_MODEL,
    ),
]
DeviceMapOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device-map",
        metavar="auto|JSON",
        help='Spread the model over devices with accelerate: auto, or a JSON object like {"": "cuda:1"}. '
        "Replaces --device.",
        rich_help_panel=_MODEL,
    ),
]
GgufFileOpt = Annotated[
    Optional[str],
    typer.Option(
        "--gguf-file",
        metavar="NAME",
        help="A .gguf file inside the hub repository --model names (converted once and cached, like a local one).",
        rich_help_panel=_MODEL,
    ),
]

ModelImplOpt = Annotated[
    ModelImpl,
    typer.Option(
        "--model-impl",
        envvar="SGCLI_MODEL_IMPL",
        help="Whose forward pass runs the model: native (sgcli's, for Llama, Mistral, Qwen2, Qwen3 and Gemma 2/3 "
        "checkpoints from a folder, a downloaded hub snapshot or a .gguf: starts ~3 s sooner), transformers, or "
        "auto (native where the model fits it; the record's model_impl_reason says why not).",
        rich_help_panel=_MODEL,
    ),
]
KernelOpt = Annotated[
    Kernel,
    typer.Option(
        "--kernel",
        envvar="SGCLI_KERNEL",
        help="The CPU kernel of the native forward's matrix products. auto: the fastest this machine measured "
        "(measured once per machine and remembered in the cache, so outputs do not change with load); torch: "
        "torch's own; onednn-f32, onednn-bf16[-prefill|-amx]: oneDNN's packed kernels (exit 2 where they cannot "
        "run). The record's kernel says which ran.",
        rich_help_panel=_MODEL,
    ),
]


MODEL_FLAGS = {
    "model": (ModelOpt, None),
    "device": (DeviceOpt, "auto"),
    "dtype": (DtypeOpt, Dtype.auto),
    "threads": (ThreadsOpt, None),
    "revision": (RevisionOpt, None),
    "trust_remote_code": (TrustOpt, False),
    "device_map": (DeviceMapOpt, None),
    "gguf_file": (GgufFileOpt, None),
    "model_impl": (ModelImplOpt, ModelImpl.auto),
    "kernel": (KernelOpt, Kernel.auto),
}


SAMPLING_FLAGS = {
    "max_tokens": (
        Annotated[
            int,
            typer.Option(
                "--max-tokens", "-n", help="Stop after this many generated tokens.", rich_help_panel=_SAMPLING
            ),
        ],
        256,
    ),
    "temperature": (
        Annotated[float, typer.Option("--temperature", "-t", help="0 = greedy.", rich_help_panel=_SAMPLING)],
        0.0,
    ),
    "top_p": (Annotated[float, typer.Option("--top-p", rich_help_panel=_SAMPLING)], 1.0),
    "top_k": (Annotated[int, typer.Option("--top-k", help="0 = off.", rich_help_panel=_SAMPLING)], 0),
    "seed": (Annotated[int, typer.Option("--seed", rich_help_panel=_SAMPLING)], 0),
    "stop": (
        Annotated[
            Optional[list[str]],
            typer.Option(
                "--stop",
                help="Stop when this string appears; repeatable.",
                rich_help_panel=_SAMPLING,
                callback=stop_strings,
            ),
        ],
        None,
    ),
    "repetition_guard": (
        Annotated[
            bool,
            typer.Option(
                "--repetition-guard/--no-repetition-guard",
                envvar="SGCLI_REPETITION_GUARD",
                help="End an output stuck repeating one span (8+ copies over 64+ characters) with finish_reason "
                "repetition, instead of at --max-tokens. In-process models only.",
                rich_help_panel=_SAMPLING,
            ),
        ],
        True,
    ),
}


# Names the renderer sets itself (transformers' render_jinja_template): as --chat-template-kwargs keys they
# would clash with its own ("got multiple values") or silently change the prompt. Value: what to use instead.
RESERVED_TEMPLATE_KWARGS = {
    "messages": "the chat comes from the prompt, an --input line or --messages",
    "conversations": "the chat comes from the prompt, an --input line or --messages",
    "tools": "give 'tools' in an --input line or in the --messages file",
    "documents": "sgcli passes no documents to the template",
    "chat_template": "use --template-name",
    "add_generation_prompt": "use `template render --no-add-generation-prompt`; generate always opens the "
    "assistant's turn",
    "continue_final_message": "sgcli always renders the chat as given",
    "return_assistant_tokens_mask": "sgcli does not take the mask",
}


@dataclass
class PromptFlags:
    """How the prompt becomes the model's input: system message, chat template and its variables."""

    system: str | None = None
    raw: bool = False
    template_name: str | None = None
    chat_template_kwargs: str | None = None

    def template_kwargs(self) -> dict | None:
        """--chat-template-kwargs as an object; bad JSON or a non-object is exit 2 (call before loading)."""
        if self.chat_template_kwargs is None:
            return None

        kwargs = json_object(self.chat_template_kwargs, "--chat-template-kwargs", "e.g. '{\"enable_thinking\": false}'")
        reserved = next((key for key in kwargs if key in RESERVED_TEMPLATE_KWARGS), None)
        if reserved is not None:
            raise UserError(
                f"--chat-template-kwargs: '{reserved}' is set by the renderer, not a template variable to pass",
                hint=RESERVED_TEMPLATE_KWARGS[reserved],
            )
        return kwargs

    def check(self) -> None:
        """--raw sends the prompt without a template: the flags that act on the template are refused with it."""
        kwargs = self.template_kwargs()
        if not self.raw:
            return
        for flag, given in (
            ("--system", self.system is not None),
            ("--template-name", self.template_name is not None),
            ("--chat-template-kwargs", kwargs is not None),
        ):
            if given:
                raise UserError(f"{flag} has no template to go to with --raw", hint="drop one of them")

    def options(self):
        return PromptOptions(self.system, self.raw, self.template_name, self.template_kwargs())


def _template_name(value: str | None) -> str | None:
    """Typer callback of --template-name: `--template-name ''` (an unset shell variable) is no name at all,
    and was read as the default template."""
    if value is not None and not value.strip():
        raise typer.BadParameter("is empty; give a template's name (`sgcli tokenizer inspect` lists them) or drop it")
    return value


PROMPT_FLAGS = {
    "system": (
        Annotated[
            Optional[str],
            typer.Option(
                "--system",
                "-s",
                help="System message for the chat template.",
                rich_help_panel=_PROMPT,
                callback=utf8_text,
            ),
        ],
        None,
    ),
    "raw": (
        Annotated[
            bool,
            typer.Option("--raw", help="Send the prompt as is, without the chat template.", rich_help_panel=_PROMPT),
        ],
        False,
    ),
    "template_name": (
        Annotated[
            Optional[str],
            typer.Option(
                "--template-name",
                help="Which named chat template to use.",
                rich_help_panel=_PROMPT,
                callback=_template_name,
            ),
        ],
        None,
    ),
    "chat_template_kwargs": (
        Annotated[
            Optional[str],
            typer.Option(
                "--chat-template-kwargs",
                metavar="JSON",
                help="Variables for the chat template, e.g. '{\"enable_thinking\": false}'.",
                rich_help_panel=_PROMPT,
            ),
        ],
        None,
    ),
}


def takes_model(**kw):
    """The command gets `model_flags: ModelOptions`."""
    return takes("model_flags", ModelOptions, MODEL_FLAGS, **kw)


def takes_sampling(**kw):
    """The command gets `sampling: SamplingParams`."""
    return takes("sampling", SamplingParams, SAMPLING_FLAGS, **kw)


def takes_prompt(**kw):
    """The command gets `prompt_flags: PromptFlags`."""
    return takes("prompt_flags", PromptFlags, PROMPT_FLAGS, **kw)
