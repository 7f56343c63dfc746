"""Test helpers shared across modules."""

from __future__ import annotations

import contextlib


def tokenizer_folder(folder, smol_tokenizer, chat_template):
    """A tokenizer folder: SmolLM2's tokenizer.json with `chat_template` in its tokenizer_config.json."""
    import json
    import shutil

    folder.mkdir()
    shutil.copy(smol_tokenizer.vocab.source, folder / "tokenizer.json")
    config = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "chat_template": chat_template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


# A structural tag with one tool call whose arguments have a schema (a city).
WEATHER_TAGS = {
    "structures": [
        {
            "begin": "<function=weather>",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "end": "</function>",
        }
    ],
    "triggers": ["<function="],
}

_compiled: dict = {}  # (backend, spec, vocab id) -> Compiled: compiled once per test run, as a batch does


def generate_with(
    lm, tokenizer, spec, backend=None, *, seed=0, max_tokens=200, temperature=1.0, prompt="Answer:", stop=()
):
    """Run one constrained generation on `lm` and return the record dict."""
    from sgcli.backends import DEFAULT_BACKEND, compile_for
    from sgcli.backends.keyword_coverage import weakened_keywords
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    vocab = tokenizer.vocab.padded(lm.logits_width)
    key = (backend or DEFAULT_BACKEND, spec, id(vocab))
    if key not in _compiled:
        _compiled[key] = (compile_for(key[0], spec, vocab)[0], vocab)  # the vocab is kept so its id stays its own
    compiled = _compiled[key][0]
    session = Session(
        lm,
        tokenizer,
        compiled,
        SamplingParams(temperature=temperature, seed=seed),
        max_tokens,
        tuple(stop),
        PromptOptions(raw=True),
        weakened=weakened_keywords(compiled),  # as generate records them
    )
    events = list(session.stream(Request(seed, prompt)))
    return events[-1].record


def random_llama(
    vocab_size: int,
    name: str = "tiny-random-llama",
    *,
    initializer_range: float = 0.02,
    tied: bool = False,
    eos_token_id: int | None = None,
    impl: str = "transformers",
):
    """A 2-layer randomly initialised Llama (seeded) with `vocab_size` logits, as sgcli's LoadedModel.

    `initializer_range` sets how sharp its logits are: the default barely reacts to the prompt,
    0.3 gives rows that really differ (batching tests need outputs of different lengths).
    `impl` "native": the same weights in sgcli's own forward (`sgcli.engine.llama`), whose batches
    pack out padding and prefill joining rows inside their steps."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from sgcli.engine.loader import LoadedModel
    from sgcli.engine.runtime import TransformersRuntime
    from sgcli.models.refs import ModelRef

    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=tied,
        initializer_range=initializer_range,
        **({} if eos_token_id is None else {"eos_token_id": eos_token_id}),  # else LlamaConfig's own
    )
    model = LlamaForCausalLM(config).eval()
    if impl == "native":
        from pathlib import Path

        from sgcli.engine import llama
        from sgcli.engine.runtime import NativeRuntime

        weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        native = llama.load(Path(name), config.to_dict(), torch.float32, weights=weights)
        return LoadedModel(NativeRuntime(native), ModelRef("dir", name, name), "cpu", "float32", vocab_size, 0.0)
    return LoadedModel(TransformersRuntime(model), ModelRef("dir", name, name), "cpu", "float32", vocab_size, 0.0)


def cli_options(*command: str) -> dict:
    """{flag: click parameter} of one sgcli command (`cli_options("tokenizer", "inspect")`), from the
    click command typer builds: what its --help shows, without rendering it."""
    from typer.main import get_command

    from sgcli.cli.app import app

    node = get_command(app)
    for name in command:
        node = node.commands[name]
    return {flag: param for param in node.params for flag in getattr(param, "opts", [])}


def patch_everywhere(monkeypatch, module, name: str, value) -> None:
    """`monkeypatch.setattr(module, name, value)`, and the same in every sgcli module that imported
    that object by name at its top (`from sgcli.x import name` binds its own reference)."""
    import sys

    original = getattr(module, name)
    monkeypatch.setattr(module, name, value)
    for other in list(sys.modules.values()):
        if other is module or not getattr(other, "__name__", "").startswith("sgcli"):
            continue
        if getattr(other, name, None) is original:
            monkeypatch.setattr(other, name, value)


class RecordingReporter:
    """A `sgcli.app.report.Reporter` that keeps what a run tells a person, for assertions."""

    def __init__(self):
        self.notices: list[tuple[str, str]] = []
        self.tallies: list = []
        self.counted: list[tuple[str, int, int]] = []  # (title, total, advanced)

    def stage(self, title):
        import contextlib

        return contextlib.nullcontext(lambda description, step, total: None)

    def counter(self, title, total):
        import contextlib

        @contextlib.contextmanager
        def count():
            advanced = [0]
            yield lambda: advanced.__setitem__(0, advanced[0] + 1)
            self.counted.append((title, total, advanced[0]))

        return count()

    def notice(self, label, message):
        self.notices.append((label, message))

    def reasoning(self, text):
        pass

    def answer_text(self, sink, text):
        sink.write_text(text)

    def answer_end(self, sink, record, *, json_out):
        if json_out:
            sink.write(record)
        else:
            sink.write_text("\n")

    def tally(self, tally):
        self.tallies.append(tally)


@contextlib.contextmanager
def output_locked_by_another_process(out):
    """A second Python process holding `out`'s RecordWriter lock until the block ends (then killed:
    the kernel drops a dead process's lock). Yields that process, whose pid the refusal must name."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import time\nfrom pathlib import Path\nfrom sgcli.batch.records import RecordWriter\n"
        f"w = RecordWriter(Path({str(out)!r}))\nprint('locked', flush=True)\ntime.sleep(60)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    holder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


@contextlib.contextmanager
def bounded_hang(seconds: int = 30):
    """Fail the test when its block blocks past `seconds` (SIGALRM in the main thread), rather than hang
    the suite: for reads that must never wait, such as a FIFO nothing writes to."""
    import signal

    def hung(signum, frame):
        raise AssertionError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _gguf_value(value) -> tuple[int, bytes]:
    """(GGUF value type, encoded value) for a Python value: str, bool, int (i32), float (f32), list."""
    import struct

    if isinstance(value, str):
        raw = value.encode("utf-8")
        return 8, struct.pack("<Q", len(raw)) + raw
    if isinstance(value, bool):
        return 7, struct.pack("<?", value)
    if isinstance(value, int):
        return 5, struct.pack("<i", value)
    if isinstance(value, float):
        return 6, struct.pack("<f", value)
    if isinstance(value, list):
        encoded = [_gguf_value(v) for v in value]
        element = encoded[0][0] if encoded else 8
        return 9, struct.pack("<IQ", element, len(value)) + b"".join(raw for _, raw in encoded)
    raise TypeError(type(value))


def gguf_bytes(metadata: dict) -> bytes:
    """A GGUF v3 file's bytes holding `metadata` and no tensors (a writer for tests)."""
    import struct

    body = b""
    for key, value in metadata.items():
        kind, raw = _gguf_value(value)
        name = key.encode("utf-8")
        body += struct.pack("<Q", len(name)) + name + struct.pack("<I", kind) + raw
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata)) + body
