"""The model, sampling and prompt flag groups, declared once for every command that runs a model.

Each group is a dataclass holding the flags as given, with the checks that belong to it
(run once, before anything slow) and the conversions the engine needs. Commands take a
group with `takes_model()`, `takes_sampling()`, `takes_prompt()` (see `flag_groups.takes`);
`only=` and `defaults=` let a command take a subset or its own defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Optional

import typer

from sgcli.batch.requests import PromptOptions
from sgcli.cli.flag_groups import takes
from sgcli.engine.flags import check_device, check_sampling, json_object, parse_device_map
from sgcli.engine.loader import load_model
from sgcli.errors import UserError
from sgcli.extras import require
from sgcli.models.refs import resolve_model
from sgcli.serving.base import Sampling
from sgcli.tokenizers import load_tokenizer


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class ModelImpl(str, Enum):
    auto = "auto"
    native = "native"
    transformers = "transformers"


DEVICES = ("auto", "cpu", "cuda", "mps")  # and cuda:N


def parse_device(value: str) -> str:
    """--device: one of DEVICES or cuda:N; anything else is a usage error (exit 2) listing them."""
    if value in DEVICES or re.fullmatch(r"cuda:\d+", value):
        return value
    raise typer.BadParameter(f"'{value}' is not one of auto, cpu, cuda, cuda:N, mps.")


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
        parser=parse_device,
        metavar="[auto|cpu|cuda|cuda:N|mps]",
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
        "busy now, at most 8 (OMP_NUM_THREADS where set); the record's timings.threads says how many ran.",
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


@dataclass
class ModelFlags:
    """Which model, where and how it runs."""

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    device_map: str | None = None
    gguf_file: str | None = None
    model_impl: str = "auto"

    def check(self) -> None:
        """The model flags in range (a device this machine has, a readable --device-map), or exit 2;
        only --device cuda/mps imports torch."""
        check_device(self.device)
        parse_device_map(self.device_map, self.device)
        if self.threads is not None and self.threads < 1:
            raise UserError("--threads must be at least 1")

    def local_only(self) -> dict[str, object]:
        """The flags that only the in-process model reads, as given (a server has its own model)."""
        return {
            "--revision": self.revision,
            "--trust-remote-code": self.trust_remote_code,
            "--device-map": self.device_map,
            "--gguf-file": self.gguf_file,
            "--model-impl": None if self.model_impl == "auto" else self.model_impl,
        }

    def ref(self):
        """The model reference (a --gguf-file is downloaded here). A missing [generate] extra is named
        first: installing the model alone would only lead to that error next."""

        require("generate", "running a model")

        return resolve_model(
            self.model, revision=self.revision, gguf_file=self.gguf_file, trust_remote_code=self.trust_remote_code
        )

    def tokenizer(self, progress=None):
        """The model's own tokenizer, from the same revision / GGUF file."""
        return load_tokenizer(self.model, progress=progress, revision=self.revision, gguf_file=self.gguf_file)

    def load(self, ref, progress=None):

        device_map = parse_device_map(self.device_map, self.device)
        return load_model(
            ref,
            device=self.device,
            dtype=self.dtype,
            progress=progress,
            threads=self.threads,
            device_map=device_map,
            impl=self.model_impl,
        )


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
}


@dataclass
class SamplingFlags:
    """How tokens are picked and when generation stops."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    stop: list[str] | None = None
    repetition_guard: bool = True

    def check(self) -> None:
        check_sampling(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=self.seed, max_tokens=self.max_tokens
        )

    def params(self):
        """The in-process sampler's parameters (imports torch)."""
        from sgcli.engine.sampling import SamplingParams

        return SamplingParams(self.temperature, self.top_p, self.top_k, self.seed)

    def for_server(self):
        return Sampling(self.max_tokens, self.temperature, self.top_p, self.top_k, self.seed, tuple(self.stop or ()))


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
            typer.Option("--stop", help="Stop when this string appears; repeatable.", rich_help_panel=_SAMPLING),
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

        return json_object(self.chat_template_kwargs, "--chat-template-kwargs", "e.g. '{\"enable_thinking\": false}'")

    def check(self) -> None:
        kwargs = self.template_kwargs()
        if kwargs is not None and self.raw:
            raise UserError("--chat-template-kwargs has no template to go to with --raw", hint="drop one of them")

    def options(self):
        return PromptOptions(self.system, self.raw, self.template_name, self.template_kwargs())


PROMPT_FLAGS = {
    "system": (
        Annotated[
            Optional[str],
            typer.Option("--system", help="System message for the chat template.", rich_help_panel=_PROMPT),
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
            typer.Option("--template-name", help="Which named chat template to use.", rich_help_panel=_PROMPT),
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


def new_session(lm, tokenizer, compiled, sampling: SamplingFlags, prompting: PromptFlags, **options):
    """A generation session run as the sampling and prompt flags say (`options`: Session's own keywords)."""
    from sgcli.engine.session import Session

    return Session(
        lm,
        tokenizer,
        compiled,
        sampling.params(),
        sampling.max_tokens,
        tuple(sampling.stop or ()),
        prompting.options(),
        repetition_guard=sampling.repetition_guard,
        **options,
    )


def takes_model(**kw):
    """The command gets `model_flags: ModelFlags`."""
    return takes("model_flags", ModelFlags, MODEL_FLAGS, **kw)


def takes_sampling(**kw):
    """The command gets `sampling: SamplingFlags`."""
    return takes("sampling", SamplingFlags, SAMPLING_FLAGS, **kw)


def takes_prompt(**kw):
    """The command gets `prompt_flags: PromptFlags`."""
    return takes("prompt_flags", PromptFlags, PROMPT_FLAGS, **kw)
