"""Model, sampling, prompt and engine flags: declared once (flag groups), checked before anything
loads, and the model options a transformers user reaches for (--revision, --trust-remote-code,
--device-map, mps, --dtype auto, --chat-template-kwargs, --gguf-file) reaching the loaders."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated

import pytest
import typer
from helpers import cli_options, patch_everywhere

from sgcli.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
CAPITAL = ROOT / "examples" / "capital.json"
MODEL_COMMANDS = {"generate": [], "compare-backends": [], "bench": ["bench"], "template render": []}
THINKING = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def no_load(monkeypatch):
    """Loading a model or tokenizer fails the test: the case must be refused before that."""

    def boom(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded before the bad input was refused")

    import sgcli.engine.loader
    import sgcli.tokenizers

    patch_everywhere(monkeypatch, sgcli.tokenizers, "load_tokenizer", boom)
    patch_everywhere(monkeypatch, sgcli.engine.loader, "load_model", boom)


def _flat(text: str) -> str:
    """Output with rich's box drawing and line wrapping undone, for substring checks."""
    return " ".join(text.replace("│", " ").split())


def _params(command: str) -> dict[str, object]:
    from sgcli.cli.app import app

    group = typer.main.get_command(app)
    for part in command.split():
        group = group.commands[part]
    return {p.name: p for p in group.params}


# -- the flag-group mechanism --------------------------------------------------------------------


class Color(str, Enum):
    red = "red"
    blue = "blue"


@dataclass
class A:
    x: int = 1
    color: str = "red"


@dataclass
class B:
    y: str = "b"


def test_groups_stack_and_arrive_as_objects(tmp_path):
    from typer.testing import CliRunner

    from sgcli.cli.flag_groups import takes

    a_flags = {
        "x": (Annotated[int, typer.Option("--x")], 1),
        "color": (Annotated[Color, typer.Option("--color")], Color.red),
    }
    b_flags = {"y": (Annotated[str, typer.Option("--y")], "b"), "z": (Annotated[int, typer.Option("--z")], 0)}
    seen = {}

    @takes("b", B, b_flags, only=("y",), defaults={"y": "given"})
    @takes("a", A, a_flags)
    def command(name: Annotated[str, typer.Argument()], a: A = None, own: bool = False, b: B = None):
        seen.update(name=name, a=a, own=own, b=b)

    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["n", "--x", "5", "--color", "blue", "--own"])
    assert result.exit_code == 0, result.output
    assert seen == {"name": "n", "a": A(5, "blue"), "own": True, "b": B("given")}
    assert type(seen["a"].color) is str  # Enum choices arrive as their plain values
    assert CliRunner().invoke(app, ["n", "--z", "1"]).exit_code == 2  # `only` left --z out
    bad = CliRunner().invoke(app, ["n", "--color", "green"])
    assert bad.exit_code == 2 and "'green' is not one of" in bad.output
    with pytest.raises(ValueError, match="declares"):
        takes("a", A, a_flags)(lambda x=0, a=None: None)  # a flag the command declares itself too
    with pytest.raises(ValueError, match="no flags"):
        takes("b", B, b_flags, only=("nope",))


@pytest.mark.parametrize("command", list(MODEL_COMMANDS))
def test_model_commands_share_the_model_flags_with_their_env_vars(command):
    params = _params(command)
    for name, env in (("model", "SGCLI_MODEL"), ("revision", None), ("gguf_file", None)):
        assert params[name].rich_help_panel == "Model" and params[name].envvar == env, (command, name)
    if command != "template render":  # it renders with the model's tokenizer; nothing else of it loads
        for name, env in (("device", "SGCLI_DEVICE"), ("dtype", "SGCLI_DTYPE"), ("threads", "SGCLI_THREADS")):
            assert params[name].envvar == env and params[name].rich_help_panel == "Model", (command, name)
        assert {"trust_remote_code", "device_map"} <= set(params)


def test_engine_choices_are_the_serving_dialects():
    from sgcli.cli.engine_options import Engine
    from sgcli.serving import LOCAL, engine_names

    assert [e.value for e in Engine] == [LOCAL, *engine_names()]


@pytest.mark.parametrize(
    "flags, needles",
    [
        (["--device", "tpu"], ["'tpu' is not one of", "cuda:N", "mps"]),
        (["--device", "cuda:x"], ["'cuda:x' is not one of"]),
        (["--dtype", "fp8"], ["'fp8' is not one of", "bfloat16"]),
        (["--engine", "tgi"], ["'tgi' is not one of", "sglang"]),
    ],
)
@pytest.mark.parametrize("command", ["generate", "compare-backends"])
def test_choice_typos_are_exit_2_naming_the_choices(run_cli, no_load, command, flags, needles):
    result = run_cli(command, "--schema", CAPITAL, *flags, "hi")
    assert result.exit_code == 2, result.output
    for needle in needles:
        assert needle in _flat(result.output), (needle, result.output)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "CPU", "cuda:"])
def test_the_flag_and_the_loader_read_devices_with_one_parser(run_cli, no_load, device):
    """--device and `load_model(device=...)` refuse the same names with the same words."""
    from sgcli.engine.flags import check_device

    with pytest.raises(UserError) as caught:
        check_device(device)
    result = run_cli("generate", "--schema", CAPITAL, "--device", device, "hi")
    assert result.exit_code == 2 and caught.value.message in _flat(result.output), result.output


def test_help_lists_the_choices(run_cli):
    """Each choice list in the help's one spelling, <a|b>: --device alone wrote [auto|cpu|...]."""
    text = run_cli("generate", "--help").output
    assert "<auto|cpu|cuda|cuda:N|" in text and "<auto|float32|bfloat16" in text and "local|vllm|sglang" in text
    assert "[auto|" not in text


@pytest.mark.parametrize(
    "command, readme_name",
    [("generate", "generate"), ("compare-backends", "compare-backends"), ("bench", "bench --generate")],
)
def test_each_max_tokens_default_is_shown_and_the_readme_names_it(command, readme_name):
    """--max-tokens is 256, 128 or 64 by command; the README's shared-flags part named none of them."""
    option = cli_options(command)["--max-tokens"]
    assert option.show_default is not False and isinstance(option.default, int)
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert f"{option.default} in `{readme_name}`" in readme, (command, option.default)


# -- checks before anything loads ----------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--device", "mps"], "no Apple GPU (MPS)"),
        (["--chat-template-kwargs", "{enable_thinking: false}"], "--chat-template-kwargs: not valid JSON"),
        (["--chat-template-kwargs", "[1]"], "--chat-template-kwargs must be a JSON object, not list"),
        (["--chat-template-kwargs", "{}", "--raw"], "no template to go to with --raw"),
        (["--raw", "-s", "SYSTEMTEXT"], "--system has no template to go to with --raw"),
        (["--chat-template-kwargs", '{"chat_template": "x"}'], "'chat_template' is set by the renderer"),
        (["--raw", "--template-name", "nosuch"], "--template-name has no template to go to with --raw"),
        (["--device-map", "everywhere"], "--device-map: not valid JSON"),
        (["--device-map", '"auto"'], "--device-map must be a JSON object, not str"),
        (["--device-map", "auto", "--device", "cpu"], "--device cpu and --device-map both place the model"),
        (["--gguf-file", "m.gguf"], "--model must be that repository's id"),
        (["--model", "org/name", "--gguf-file", "m.bin"], "not the name of a .gguf file"),
        (["--revision", "main"], "--revision main is for a Hugging Face hub id"),
        (["--threads", "0"], "--threads 0 must be at least 1"),
    ],
)
def test_bad_model_flags_exit_2_before_loading(run_cli, no_load, monkeypatch, flags, needle):
    import torch

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    result = run_cli("generate", "--schema", CAPITAL, *flags, "hi")
    assert result.exit_code == 2, result.output
    assert needle in result.output and "internal error" not in result.output, result.output


def test_config_file_feeds_the_model_group(run_cli, no_load, tmp_path, monkeypatch):
    import torch

    from sgcli import config

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    (tmp_path / "sgcli.toml").write_text('device = "mps"\ndtype = "bfloat16"\n')
    monkeypatch.chdir(tmp_path)
    config.reset()
    try:
        result = run_cli("generate", "--schema", CAPITAL, "hi")
        assert result.exit_code == 2 and "--device mps" in result.output, result.output
        typo = run_cli("generate", "--schema", CAPITAL, "--device", "cpu", "--dtype", "fp16", "hi")
        assert typo.exit_code == 2 and "'fp16' is not one of" in _flat(typo.output)
    finally:
        config.reset()


def test_a_missing_accelerate_names_the_extra(monkeypatch):
    import importlib.util

    from sgcli.engine.flags import parse_device_map

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name))
    with pytest.raises(UserError) as caught:
        parse_device_map("auto")
    assert "accelerate" in caught.value.message and "sgcli's [generate] extra" in caught.value.hint
    assert parse_device_map(None) is None


def test_device_maps_parse():
    from sgcli.engine.flags import parse_device_map

    assert parse_device_map("auto") == "auto"
    assert parse_device_map('{"": "cpu"}') == {"": "cpu"}


# -- hub options reach the loaders (fakes: no network here) --------------------------------------


@pytest.fixture
def fake_hub(monkeypatch, smol_tokenizer, tmp_path):
    """hf_hub_download answering from a folder, recording what it was asked."""
    import huggingface_hub

    import sgcli.models.hub as hub

    calls = []
    repo = tmp_path / "hub"
    repo.mkdir()
    shutil.copy(smol_tokenizer.vocab.source, repo / "tokenizer.json")

    def download(repo_id, filename, revision=None, **kwargs):
        calls.append((repo_id, filename, revision, kwargs))
        if not (repo / filename).exists():
            raise FileNotFoundError(filename)
        return str(repo / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    patch_everywhere(monkeypatch, hub, "offline", lambda: False)
    return calls, repo


def test_revision_reaches_every_tokenizer_download(fake_hub):
    from sgcli.tokenizers import load_tokenizer

    calls, _ = fake_hub
    tok = load_tokenizer("org/revision-test", revision="v1.2")
    assert tok.name == "org/revision-test@v1.2"
    assert calls and {(c[0], c[2]) for c in calls} == {("org/revision-test", "v1.2")}
    assert calls[0][1] == "tokenizer.json"


def test_gguf_file_from_the_hub_goes_through_the_content_keyed_conversion_cache(fake_hub, monkeypatch):
    import sgcli.tokenizers.gguf as gguf_tokenizers
    from sgcli.cache.paths import converted_dir
    from sgcli.models.refs import default_gguf, resolve_model
    from sgcli.tokenizers import load_tokenizer

    calls, repo = fake_hub
    name = default_gguf().name
    (repo / name).symlink_to(default_gguf())  # the hub cache holds the same file at another path
    ref = resolve_model("org/m-GGUF", gguf_file=name, revision="abc123")
    assert (ref.kind, Path(ref.location).name, ref.display) == ("gguf", name, f"org/m-GGUF@abc123:{name}")
    assert calls[-1][:3] == ("org/m-GGUF", name, "abc123")
    # the cache folder is named by the file's name and content, not its path: one conversion for both
    assert converted_dir(Path(ref.location)) == converted_dir(default_gguf())

    converted = []
    real = load_tokenizer(None)

    def fake(path, load, progress=None):
        converted.append(path)
        return real

    patch_everywhere(monkeypatch, gguf_tokenizers, "load_converted", fake)
    load_tokenizer("org/m-GGUF", gguf_file=name, revision="abc123")
    assert converted == [Path(ref.location)]  # the tokenizer follows the same file


def test_offline_hub_gguf_is_exit_2(run_cli, monkeypatch):
    import huggingface_hub

    import sgcli.models.hub as hub

    def download(*args, **kwargs):
        assert kwargs.get("local_files_only") is True
        raise FileNotFoundError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    patch_everywhere(monkeypatch, hub, "offline", lambda: True)
    result = run_cli("generate", "--schema", CAPITAL, "--model", "org/m-GGUF", "--gguf-file", "m.gguf", "hi")
    assert result.exit_code == 2 and "not reachable" in result.output and "m.gguf" in result.output, result.output


def test_revision_and_trust_reach_from_pretrained(monkeypatch):
    import transformers

    import sgcli.models.hub as hub
    from sgcli.engine.loader import _from_pretrained
    from sgcli.models.refs import resolve_model

    seen = {}

    def from_pretrained(location, **kwargs):
        seen.update(kwargs, location=location)
        return "model"

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    patch_everywhere(monkeypatch, hub, "offline", lambda: False)
    ref = resolve_model("org/custom", revision="0123abc", trust_remote_code=True)
    assert _from_pretrained(ref, "auto", {"device_map": "auto"}) == "model"
    assert seen == {
        "location": "org/custom",
        "dtype": "auto",
        "revision": "0123abc",
        "trust_remote_code": True,
        "device_map": "auto",
    }
    seen.clear()
    _from_pretrained(resolve_model("org/plain"), "auto")
    assert "revision" not in seen and "trust_remote_code" not in seen


def test_custom_code_without_trust_is_exit_2_naming_the_risk(monkeypatch, tmp_path):
    import transformers

    import sgcli.models.hub as hub
    from sgcli.engine.loader import _from_pretrained
    from sgcli.models.refs import resolve_model

    def refuse(location, **kwargs):
        raise ValueError(f"{location} contains custom code ... Please pass the argument `trust_remote_code=True`")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    patch_everywhere(monkeypatch, hub, "offline", lambda: False)
    with pytest.raises(UserError) as caught:
        _from_pretrained(resolve_model("org/custom"), "auto")
    assert "--trust-remote-code" in caught.value.hint and "your permissions" in caught.value.hint

    folder = tmp_path / "custom"  # a local folder is refused from its config, before transformers runs
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"auto_map": {"AutoModelForCausalLM": "m.MyModel"}}))
    with pytest.raises(UserError, match="auto_map"):
        _from_pretrained(resolve_model(str(folder)), "auto")


# -- dtype and placement, for real on a tiny checkpoint ------------------------------------------


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, smol_tokenizer):
    """A tiny random Llama saved in bfloat16 with the SmolLM2 tokenizer: a model folder like any other."""
    import torch
    from helpers import random_llama

    folder = tmp_path_factory.mktemp("tiny-bf16")
    lm = random_llama(len(smol_tokenizer.vocab))
    lm.model.to(torch.bfloat16).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):  # with its chat template
        shutil.copy(Path(smol_tokenizer.vocab.source).parent / name, folder / name)
    return folder


def test_dtype_auto_is_float32_on_cpu_and_the_checkpoints_own_on_a_gpu(tiny_checkpoint, monkeypatch):
    import torch

    import sgcli.engine.loader as loader
    from sgcli.models.refs import resolve_model

    ref = resolve_model(str(tiny_checkpoint))
    assert loader.load_model(ref, device="cpu").dtype == "float32"  # the measured CPU rule
    assert loader.load_model(ref, device="cpu", dtype="float16").dtype == "float16"
    assert loader.pick_dtype("auto", "cuda") is torch.bfloat16  # a dequantized GGUF
    patch_everywhere(monkeypatch, loader, "pick_device", lambda device: "meta")  # a GPU stand-in: not the CPU
    on_gpu = loader.load_model(ref)
    assert (on_gpu.device, on_gpu.dtype) == ("meta", "bfloat16")  # from the checkpoint's config


def test_generate_with_device_map_records_device_dtype_and_template(run_cli, tiny_checkpoint, tmp_path):
    out = tmp_path / "o.jsonl"
    result = run_cli(
        "generate",
        "--model",
        tiny_checkpoint,
        "--regex",
        "[a-z]{2}",
        "--device-map",
        '{"": "cpu"}',
        "--dtype",
        "bfloat16",
        "--max-tokens",
        "4",
        "--json",
        "-o",
        out,
        "hi",
    )
    assert result.exit_code in (0, 1), result.output
    record = json.loads(out.read_text())
    assert (record["device"], record["dtype"], record["chat_template"]) == ("cpu", "bfloat16", "default")
    assert "(cpu, bfloat16, transformers, template default)" in result.stderr  # --device-map: accelerate places
    from sgcli.records import GenerationRecord

    GenerationRecord.model_validate(record)


def test_raw_generate_records_no_template(run_cli, tiny_checkpoint, tmp_path):
    out = tmp_path / "o.jsonl"
    args = ["--regex", "[a-z]{2}", "--max-tokens", "4", "--raw", "--json", "-o", out, "hi"]
    result = run_cli("generate", "--model", tiny_checkpoint, *args)
    assert result.exit_code in (0, 1), result.output
    record = json.loads(out.read_text())
    assert (record["device"], record["dtype"], record["chat_template"]) == ("cpu", "float32", "none")


# -- chat-template kwargs, rendered for real ------------------------------------------------------


@pytest.fixture
def thinking_folder(tmp_path, smol_tokenizer):
    from helpers import tokenizer_folder

    return tokenizer_folder(tmp_path / "thinking", smol_tokenizer, THINKING)


@pytest.mark.parametrize("kwargs", [{"enable_thinking": False}, {"enable_thinking": True}, {}])
def test_template_kwargs_render_as_apply_chat_template(thinking_folder, kwargs):
    from transformers import AutoTokenizer

    from sgcli.tokenizers import load_tokenizer

    messages = [{"role": "user", "content": "Hi"}]
    ours = load_tokenizer(str(thinking_folder)).render_prompt(messages, template_kwargs=kwargs).text
    theirs = AutoTokenizer.from_pretrained(str(thinking_folder)).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, **kwargs
    )
    assert ours == theirs
    assert ("<think>" in ours) == (kwargs == {"enable_thinking": False})


def test_template_render_takes_the_kwargs(run_cli, thinking_folder, tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    plain = run_cli("template", "render", "--model", thinking_folder, "--messages", chat)
    off = run_cli(
        "template",
        "render",
        "--model",
        thinking_folder,
        "--messages",
        chat,
        "--chat-template-kwargs",
        '{"enable_thinking": false}',
    )
    assert plain.exit_code == 0 and off.exit_code == 0, off.output
    assert off.stdout == plain.stdout + "<think>\n\n</think>\n\n"
    bad = run_cli("template", "render", "--messages", chat, "--chat-template-kwargs", "nope")
    assert bad.exit_code == 2 and "not valid JSON" in bad.output


def test_session_renders_with_the_kwargs(tiny_lm, thinking_folder):
    from sgcli.backends import check_supports
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(thinking_folder))
    spec = ConstraintSpec(Kind.CHOICE, "yes\nno", "--choice", choices=("yes", "no"))
    compiled = check_supports("llguidance", spec).compile(spec, tok.vocab.padded(tiny_lm.logits_width))
    options = PromptOptions(template_kwargs={"enable_thinking": False})
    session = Session(tiny_lm, tok, compiled, SamplingParams(0.0), 4, (), options)
    text, *_ = session.render(Request(None, "Hi"))
    assert text.endswith("<think>\n\n</think>\n\n")
    assert session.placement(Request(None, "Hi"))["chat_template"] == "default"


@pytest.mark.model
def test_the_default_model_record_says_where_it_ran(run_cli):
    result = run_cli("generate", "--regex", "(Paris|London)", "--max-tokens", "8", "--json", "Capital of France?")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert (record["device"], record["dtype"], record["chat_template"]) == ("cpu", "float32", "default")
    assert record["model_impl"] == "native"  # a Llama from a .gguf: sgcli's own forward
    assert record["kernel"] in (None, "onednn-f32")  # float32 packed where this CPU measured oneDNN faster
    kernel = f" + {record['kernel']}" if record["kernel"] else ""
    assert f"(cpu, float32, native{kernel}, template default)" in result.stderr


def test_generate_without_the_generate_extra_names_it_before_the_model(run_cli, no_load, monkeypatch):
    """A light install (no torch) is told which extra to install, not that the model is missing:
    installing the model alone would only lead to the extra's error next."""
    import importlib.util

    from sgcli.models import refs as models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    patch_everywhere(monkeypatch, models, "resolve_model", lambda *a, **k: pytest.fail("the model was looked up first"))
    result = run_cli("generate", "--choice", "yes", "--choice", "no", "Is water wet?")
    assert result.exit_code == 2, result.output
    assert "torch" in result.output and "sgcli's [generate] extra" in _flat(result.output)


def test_a_tokenizer_bigger_than_the_models_vocabulary_is_exit_2_naming_both(run_cli, smol_tokenizer, tmp_path):
    """Ids past the embedding table crashed the forward pass (IndexError, exit 3): refused before the
    weights load from config.json, and after loading where no config says it (a hub id, a .gguf)."""
    from helpers import random_llama

    from sgcli.engine.checkpoint import check_logits_fit, text_tokens

    small = random_llama(64)
    small.model.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(smol_tokenizer.vocab.source).parent / name, tmp_path / name)
    tokens = text_tokens(smol_tokenizer.vocab)
    assert tokens == len(smol_tokenizer.vocab)  # SmolLM2's special tokens come first
    for impl in ("native", "transformers"):
        result = run_cli("generate", "--model", tmp_path, "--model-impl", impl, "--raw", "--regex", "[a-z]{2}", "hi")
        assert result.exit_code == 2, result.output
        assert f"vocab_size 64, fewer than the {tokens} tokens" in result.stderr
        assert "config.json" in result.stderr and "Traceback" not in result.output
    with pytest.raises(UserError, match=f"has 64 logits, fewer than the {tokens} tokens"):
        check_logits_fit(small, tokens)
    check_logits_fit(small, 64)  # equal (or more logits than tokens, masked as special) is fine


def _tiny_folder(folder: Path, smol_tokenizer) -> Path:
    """A 64-token random Llama with SmolLM2's tokenizer files (the damage tests fail before the vocab check)."""
    from helpers import random_llama

    random_llama(64).model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(smol_tokenizer.vocab.source).parent / name, folder / name)
    return folder


@pytest.mark.parametrize("damage", ["truncated", "garbage-header"])
def test_a_damaged_safetensors_file_is_exit_2_naming_it_on_both_forwards(run_cli, smol_tokenizer, tmp_path, damage):
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    file = _tiny_folder(tmp_path, smol_tokenizer) / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:8] + b"garbagegarba" + data[20:])
    for impl in ("native", "transformers"):
        with pytest.raises(UserError, match=r"model\.safetensors is damaged \(.*\): re-download it"):
            load_model(resolve_model(str(tmp_path)), device="cpu", impl=impl)
    result = run_cli("generate", "--model", tmp_path, "--raw", "--regex", "[a-z]{2}", "hi")
    assert result.exit_code == 2, result.output
    assert f"{file} is damaged" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("index", "said"),
    [
        ({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}, "names the shard model-0"),
        ({"metadata": {}}, "has no weight_map"),
        ('{"weight_map":', "cannot read the shard index"),
    ],
    ids=["missing-shard", "no-weight-map", "bad-json"],
)
def test_a_shard_index_naming_a_missing_file_or_unreadable_is_exit_2(run_cli, smol_tokenizer, tmp_path, index, said):
    folder = _tiny_folder(tmp_path, smol_tokenizer)
    (folder / "model.safetensors").unlink()
    text = index if isinstance(index, str) else json.dumps(index)
    (folder / "model.safetensors.index.json").write_text(text)
    for impl in ("native", "transformers"):
        result = run_cli("generate", "--model", folder, "--model-impl", impl, "--raw", "--regex", "[a-z]{2}", "hi")
        assert result.exit_code == 2, result.output
        assert said in result.stderr and "model.safetensors.index.json" in result.stderr


def test_special_tokens_past_the_models_rows_are_never_generated_and_refused_in_a_prompt(
    run_cli, smol_tokenizer, tmp_path
):
    """Gemma 3's tokenizer adds `<image_soft_token>` as id 262144 to text models of 262,144 rows: such a
    model runs (the grammar is compiled on its rows), and a prompt holding that token is exit 2."""
    from helpers import random_llama

    rows = len(smol_tokenizer.vocab)
    random_llama(rows).model.save_pretrained(tmp_path)
    shutil.copy(Path(smol_tokenizer.vocab.source).parent / "tokenizer_config.json", tmp_path)
    spec = json.loads((Path(smol_tokenizer.vocab.source).parent / "tokenizer.json").read_text())
    token = {"id": rows, "content": "<image_soft_token>", "special": True, "normalized": False}
    spec["added_tokens"].append(token | {"single_word": False, "lstrip": False, "rstrip": False})
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    args = ("generate", "--model", tmp_path, "--raw", "--regex", "[a-z]{2}", "--json")
    ran = run_cli(*args, "hi")
    assert ran.exit_code == 0, ran.output
    assert re.fullmatch("[a-z]{2}", json.loads(ran.stdout.splitlines()[-1])["output"])
    refused = run_cli(*args, "hi<image_soft_token>")
    assert refused.exit_code == 2, refused.output
    assert f"token {rows} ('<image_soft_token>'), past the model's {rows} embedding rows" in refused.stderr
