"""Chat templates render exactly as transformers' `apply_chat_template` does, and a hostile
template is an exit-2 error naming it, never a crash, a hang or gigabytes of memory."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import patch_everywhere

# Uses what transformers' renderer adds over plain Jinja: namespace(), dict(), tojson with
# indent, reasoning aliasing (`thinking` filled from `reasoning_content`), tools, special tokens.
RICH = (
    "{{ bos_token }}{% set ns = namespace(n=0) %}"
    "{% if tools %}TOOLS {{ tools | tojson(indent=1) }}\n{% endif %}"
    "{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "<|im_start|>{{ m.role }}#{{ ns.n }}\n"
    "{% if m.thinking %}<think>{{ m.thinking }}</think>{% endif %}"
    "{% if m.content is string %}{{ m.content }}"
    "{% elif m.content is mapping %}{{ m.content | tojson }}"
    "{% else %}{% for part in m.content %}[{{ part.type }}]{{ part.text }}{% endfor %}{% endif %}"
    "{% if m.tool_calls is defined %}{{ dict(calls=m.tool_calls) | tojson }}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}{{ eos_token }}"
)
MESSAGES = {
    "string": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi — ünïcode & <tags>"},
        {"role": "assistant", "content": "Hello", "reasoning_content": "greet back"},
        {"role": "user", "content": "Again", "tool_calls": None},  # None-valued keys are dropped
    ],
    "list": [
        {"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "two"}]},
    ],
    "object": [
        {"role": "user", "content": {"type": "text", "text": "as an object"}},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
        },
    ],
}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
HI_MESSAGES = [{"role": "user", "content": "hi"}]
TEMPLATE_FORMS = {
    "string": RICH,
    "list": [{"name": "default", "template": RICH}, {"name": "other", "template": "x"}],
    "object": {"other": "x", "default": RICH},
}


def _folder(tmp_path: Path, smol_tokenizer, chat_template) -> Path:
    from helpers import tokenizer_folder

    return tokenizer_folder(tmp_path / "tok", smol_tokenizer, chat_template)


@pytest.mark.parametrize("template_form", list(TEMPLATE_FORMS))
@pytest.mark.parametrize("content_form", list(MESSAGES))
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_rendering_equals_apply_chat_template(tmp_path, smol_tokenizer, template_form, content_form, generation_prompt):
    from transformers import AutoTokenizer

    from sgcli.tokenizers import load_tokenizer

    folder = _folder(tmp_path, smol_tokenizer, TEMPLATE_FORMS[template_form])
    messages = MESSAGES[content_form]
    tools = TOOLS if content_form == "object" else None
    ours = load_tokenizer(str(folder)).render_prompt(messages, add_generation_prompt=generation_prompt, tools=tools)
    theirs = AutoTokenizer.from_pretrained(str(folder)).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt, tools=tools
    )
    assert ours.template is not None and ours.template.name == "default"
    assert ours.text == theirs
    assert "<think>greet back</think>" in ours.text or content_form != "string"  # the aliasing ran


HOSTILE = {
    "huge string": "{{ 'x' * 100000000 }}",
    "float range": "{% for i in range(1e8) %}x{% endfor %}",
    "huge range": "{% for i in range(100000000) %}x{% endfor %}",
    "recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "division by zero": "{{ 1 / 0 }}",
    "20 GB string": "{{ 'x' * 20000000000 }}",
    "endless loops": "{% for i in range(99999) %}{% for j in range(99999) %}{{ i }}{% endfor %}{% endfor %}",
    # no output, so only the time limit can stop it (the endless loops above grow their output: there the
    # memory and the time limit race, and which one fires first depends on the machine's speed)
    "busy loops": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    # C-level work: no bytecode runs for minutes, so the in-process signal handler never does
    "huge power": "{% set x = 7 ** (7 ** 10) %}{{ x > 1 }}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_templates_exit_2_naming_the_template(run_cli, tmp_path, smol_tokenizer, monkeypatch, name):
    from sgcli.tokenizers import templates

    monkeypatch.setattr(templates, "RENDER_TIME_S", 2.0)  # the endless loops: keep the test short
    folder = _folder(tmp_path, smol_tokenizer, {"evil": HOSTILE[name]})
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    result = run_cli("template", "render", "--tokenizer", folder, "--messages", messages)
    assert result.exit_code == 2, (name, result.output[:500])
    assert "chat template 'evil'" in result.stderr and "Traceback" not in result.output


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_limits_are_lifted_after_a_render(tmp_path, smol_tokenizer):
    """The address-space ceiling and the timer are the render's only: afterwards memory can grow again."""
    import resource

    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    before = resource.getrlimit(resource.RLIMIT_AS)
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, HOSTILE["20 GB string"])))
    with pytest.raises(UserError, match="needed more than"):
        tok.render_prompt([{"role": "user", "content": "hi"}])
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert len(bytearray(1500 * 2**20)) == 1500 * 2**20  # more than the render's ceiling allowed


# -- a single prompt renders in a forked child while the model loads (`start_render_prompt`) -------


def test_the_child_renders_what_the_process_renders(tmp_path, smol_tokenizer):
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, TEMPLATE_FORMS["list"])))
    for messages in MESSAGES.values():
        here = tok.render_prompt(messages, tools=TOOLS)
        there = tok.start_render_prompt(messages, tools=TOOLS).result()
        assert there == here  # text, ids, the template chosen and its notices
    bare = load_tokenizer(str(smol_tokenizer.vocab.source))  # a tokenizer.json alone: no template, nothing forks
    assert bare.start_render_prompt(HI_MESSAGES).result() == bare.render_prompt(HI_MESSAGES)


@pytest.mark.parametrize(
    "name", ["20 GB string", "busy loops", "huge power", "recursive macro", "division by zero", "raise"]
)
@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_a_template_that_fails_in_the_child_fails_as_it_does_here(tmp_path, smol_tokenizer, monkeypatch, name):
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer, templates

    monkeypatch.setattr(templates, "RENDER_TIME_S", 2.0)
    source = HOSTILE.get(name, "{{ raise_exception('only system messages here') }}")
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, source)))
    with pytest.raises(UserError) as here:
        tok.render_prompt(HI_MESSAGES)
    with pytest.raises(UserError) as there:
        tok.start_render_prompt(HI_MESSAGES).result()
    assert (there.value.message, there.value.hint) == (here.value.message, here.value.hint)
    assert "chat template 'default'" in there.value.message


def test_a_child_past_its_deadline_is_stopped_and_named(tmp_path, smol_tokenizer, monkeypatch):
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer, render_child

    monkeypatch.setattr(render_child, "CHILD_TIME_S", 0.5)  # before the render's own 10 s limit
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, HOSTILE["endless loops"])))
    with pytest.raises(UserError, match="chat template 'default' took more than"):
        tok.start_render_prompt(HI_MESSAGES).result()


def _children_die(monkeypatch) -> None:
    """Every render in a forked child ends the child at once (a crash, the OOM killer); renders here work."""
    from sgcli.tokenizers import templates

    parent, real = os.getpid(), templates.render

    def dies_in_the_child(*args, **kwargs):
        if os.getpid() != parent:
            os._exit(9)
        return real(*args, **kwargs)

    patch_everywhere(monkeypatch, templates, "render", dies_in_the_child)


def test_a_child_that_dies_is_rendered_again_here(tmp_path, smol_tokenizer, monkeypatch):
    """Not the template's doing (a crash, the OOM killer): the parent renders, as it did before children."""
    from sgcli.tokenizers import load_tokenizer

    _children_die(monkeypatch)
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, RICH)))
    assert tok.start_render_prompt(HI_MESSAGES).result() == tok.render_prompt(HI_MESSAGES)


# -- a batch's prompts render in one forked child while the model loads (`start_render_many`) ------


def test_a_batch_rendered_in_one_child_is_what_each_renders_here(tmp_path, smol_tokenizer):
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, RICH)))
    chats = [MESSAGES["string"], HI_MESSAGES, MESSAGES["list"], HI_MESSAGES]
    parent = os.getpid()
    there = tok.start_render_many(chats).result()
    assert there == [tok.render_prompt(m) for m in chats]  # text, ids, template, in order
    assert os.getpid() == parent
    assert tok.start_render_many([]).result() is None  # nothing to render: no child


def test_one_failing_chat_of_a_batch_fails_alone_as_it_does_here(tmp_path, smol_tokenizer):
    """A template that refuses some messages: that chat's result is the error a render here raises,
    the others are rendered."""
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    picky = "{% if messages[0].content == 'no' %}{{ raise_exception('not that one') }}{% endif %}" + RICH
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, picky)))
    chats = [HI_MESSAGES, [{"role": "user", "content": "no"}], HI_MESSAGES]
    got = tok.start_render_many(chats).result()
    with pytest.raises(UserError) as here:
        tok.render_prompt(chats[1])
    assert isinstance(got[1], UserError) and (got[1].message, got[1].hint) == (here.value.message, here.value.hint)
    assert got[0] == got[2] == tok.render_prompt(HI_MESSAGES)


def test_a_chat_past_the_time_limit_in_a_batch_fails_alone_within_the_limit(tmp_path, smol_tokenizer, monkeypatch):
    """C-level work (`7 ** (7 ** 10)`) ignores the in-process time limit: the child is ended at the
    limit, that chat gets the time-limit error and a new child renders the rest (before, the batch
    fell back to rendering in process, where it hung)."""
    import time

    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer, templates

    monkeypatch.setattr(templates, "RENDER_TIME_S", 1.0)
    # not a constant (Jinja folds those while compiling): only the chats that say 'no' take the time
    slow = "{% if messages[0].content == 'no' %}{% set x = 7 ** (7 ** (messages | length * 10)) %}{% endif %}" + RICH
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, slow)))
    no = [{"role": "user", "content": "no"}]
    started = time.monotonic()
    got = tok.start_render_many([HI_MESSAGES, no, MESSAGES["list"], no, HI_MESSAGES]).result()
    assert time.monotonic() - started < 20
    assert [type(g) is UserError for g in got] == [False, True, False, True, False]
    assert "chat template 'default' took more than 1 s" in got[1].message
    assert got[0] == got[4] == tok.render_prompt(HI_MESSAGES) and got[2] == tok.render_prompt(MESSAGES["list"])


def test_a_batch_whose_every_chat_times_out_restarts_its_child_in_a_loop(tmp_path, smol_tokenizer, monkeypatch):
    """Each timed-out chat restarts the batch's child; the restarts are a loop, not a recursion that
    grew the stack per chat (after ~1000 such chats a RecursionError, exit 3, records lost)."""
    import sys

    from sgcli import limits
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer, templates

    monkeypatch.setattr(templates, "RENDER_TIME_S", 0.05)
    depths, real = [], limits.start_bounded

    def start_bounded(*args, **kwargs):
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        depths.append(depth)
        return real(*args, **kwargs)

    patch_everywhere(monkeypatch, limits, "start_bounded", start_bounded)
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, HOSTILE["busy loops"])))
    got = tok.start_render_many([HI_MESSAGES] * 12).result()
    assert len(got) == 12 and all(isinstance(g, UserError) for g in got)
    assert all("took more than 0.05 s" in g.message for g in got), {g.message for g in got}
    assert len(depths) == 12 and max(depths[1:]) == min(depths[1:])  # each restart as deep as the last


def test_a_batch_child_that_dies_leaves_the_rendering_to_the_caller(tmp_path, smol_tokenizer, monkeypatch):
    from sgcli.tokenizers import load_tokenizer

    _children_die(monkeypatch)
    tok = load_tokenizer(str(_folder(tmp_path, smol_tokenizer, RICH)))
    assert tok.start_render_many([HI_MESSAGES]).result() is None


def test_a_batch_answers_every_line_with_its_template_rendered_in_a_child(
    run_cli, tmp_path, smol_tokenizer, monkeypatch
):
    """`generate --input` on a model folder whose template refuses one request: that line is an error
    record naming the template, the others are answered, in order (the tiny random model). Every
    render happens in the child: one in this process fails the test."""
    from helpers import random_llama

    from sgcli.tokenizers import templates

    parent, real = os.getpid(), templates.render

    def only_in_the_child(*args, **kwargs):
        assert os.getpid() != parent, "a batch's prompt was rendered in the process, not in the child"
        return real(*args, **kwargs)

    patch_everywhere(monkeypatch, templates, "render", only_in_the_child)

    picky = "{% if messages[-1].content == 'no' %}{{ raise_exception('not that one') }}{% endif %}" + RICH
    folder = _folder(tmp_path, smol_tokenizer, picky)
    random_llama(len(smol_tokenizer.vocab)).model.save_pretrained(folder)
    batch = tmp_path / "in.jsonl"
    batch.write_text("\n".join(json.dumps({"id": i, "prompt": p}) for i, p in enumerate(["hi", "no", "yes"])) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("generate", "--model", folder, "--regex", "[a-z]{1,5}", "--input", batch, "-o", out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [0, 1, 2], result.output[:500]
    assert records[1]["valid"] is None and "rejected the messages: not that one" in records[1]["errors"][0]
    assert records[0]["valid"] is True and records[2]["valid"] is True


def test_generate_refuses_a_bad_template_before_the_weights_load(run_cli, tmp_path, smol_tokenizer, monkeypatch):
    """The single prompt renders beside torch's import, and its error is exit 2 before any weights load."""
    import sgcli.engine.loader

    def boom(*args, **kwargs):
        raise AssertionError("the model loaded before the template's error")

    patch_everywhere(monkeypatch, sgcli.engine.loader, "load_model", boom)
    folder = _folder(tmp_path, smol_tokenizer, "{{ raise_exception('no chats today') }}")
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    result = run_cli("generate", "--model", folder, "--regex", "[a-z]+", "hi")
    assert result.exit_code == 2, result.output[:500]
    assert "chat template 'default' rejected the messages: no chats today" in result.stderr


@pytest.mark.parametrize("ref", ["mistral:tekken", "mistral:v3", "mistral:v7"])
def test_mistral_tokenizers_use_mistral_commons_chat_encoding(ref):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    from sgcli.tokenizers import load_tokenizer
    from sgcli.tokenizers.mistral import tokenizer_file

    messages = [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}]
    expected = MistralTokenizer.from_file(str(tokenizer_file(ref))).encode_chat_completion(
        ChatCompletionRequest(messages=messages)
    )
    rendered = load_tokenizer(ref).render_prompt(messages)
    assert rendered.ids == expected.tokens
    assert rendered.template.name == "mistral-common" and "[INST]" in rendered.text


def test_mistral_encoding_errors_exit_2(run_cli, tmp_path):
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps([{"role": "assistant", "content": "no user turn"}, {"role": "wizard"}]))
    result = run_cli("template", "render", "--tokenizer", "mistral:tekken", "--messages", messages)
    assert result.exit_code == 2, result.output[:500]
    assert "mistral-common cannot encode" in result.stderr
    named = run_cli(
        "template", "render", "--tokenizer", "mistral:tekken", "--messages", messages, "--template-name", "x"
    )
    assert named.exit_code == 2 and "drop --template-name" in named.stderr


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": "x"}],  # InvalidMessageStructureException
        [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}],
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],  # final assistant, no prefix
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "tool_calls": [{"id": "abc", "function": {"name": "f", "arguments": "{}"}}]},
        ],  # InvalidFunctionCallException
    ],
)
def test_mistral_commons_own_exceptions_exit_2(run_cli, tmp_path, messages):
    """mistral-common's validation raises MistralCommonException subclasses (not ValueError): exit 3 before."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps(messages))
    result = run_cli("template", "render", "--tokenizer", "mistral:tekken", "--messages", path)
    assert result.exit_code == 2, result.output[:500]
    assert "mistral-common cannot encode" in result.stderr


def test_mistral_commons_tool_name_refusal_is_a_user_error():
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    tools = [{"type": "function", "function": {"name": "bad name!", "parameters": {}}}]
    with pytest.raises(UserError, match="mistral-common cannot encode"):  # InvalidToolException
        load_tokenizer("mistral:tekken").render_prompt([{"role": "user", "content": "a"}], tools=tools)


def test_a_prompt_empty_once_rendered_starts_from_bos_or_is_refused_alone(run_cli, tmp_path, smol_tokenizer):
    """An empty prompt fed no ids to the model (exit 3 in the embedding). With a BOS token it starts from
    BOS, as transformers' generate does; without, a single prompt is exit 2 and a batch line an error
    record, the other lines answered."""
    from helpers import random_llama

    some = "{% if messages[-1].content != 'no' %}{{ messages[-1].content }}{% endif %}"  # 'no' renders to nothing
    folder = _folder(tmp_path, smol_tokenizer, some)
    random_llama(len(smol_tokenizer.vocab)).model.save_pretrained(folder)
    flags = ("--model", folder, "--regex", "[a-z]{1,5}", "--max-tokens", "6")
    result = run_cli("generate", *flags, "--raw", "")
    assert result.exit_code == 0, result.output[:500]  # from BOS

    folder = shutil.copytree(folder, tmp_path / "no-bos")  # another folder: tokenizers load once per process
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["bos_token"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    flags = ("--model", folder, *flags[2:])
    for prompt in (("--raw", ""), ("no",)):
        result = run_cli("generate", *flags, *prompt)
        assert result.exit_code == 2, result.output[:500]
        assert "the prompt is empty once rendered and tokenized" in result.stderr and "no BOS token" in result.stderr
    for raw, prompts in ((("--raw",), ["hi", "", "yes"]), ((), ["hi", "no", "yes"])):  # in process; in the child
        batch = tmp_path / "in.jsonl"
        batch.write_text("\n".join(json.dumps({"id": i, "prompt": p}) for i, p in enumerate(prompts)) + "\n")
        out = tmp_path / "out.jsonl"
        result = run_cli("generate", *flags, *raw, "--input", batch, "-o", out, "--force")
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in records] == [0, 1, 2], result.output[:500]
        assert records[1]["valid"] is None and "the prompt is empty" in records[1]["errors"][0]
        assert records[0]["valid"] is True and records[2]["valid"] is True


@pytest.mark.parametrize(
    "key, instead",
    [
        ("add_generation_prompt", "--no-add-generation-prompt"),
        ("messages", "--messages"),
        ("tools", "'tools'"),
        ("chat_template", "--template-name"),
        ("documents", "no documents"),
        ("continue_final_message", "as given"),
    ],
)
def test_a_name_the_renderer_sets_is_refused_in_chat_template_kwargs(run_cli, tmp_path, key, instead):
    """Not blamed on the template ("got multiple values"), nor a silently different prompt: exit 2
    naming the flag, the key and what to use instead, before any tokenizer loads."""
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(HI_MESSAGES))
    kwargs = json.dumps({key: True})
    result = run_cli(
        "template", "render", "--tokenizer", tmp_path / "none", "--messages", chat, "--chat-template-kwargs", kwargs
    )
    assert result.exit_code == 2, result.output
    assert f"--chat-template-kwargs: '{key}' is set by the renderer" in result.stderr and instead in result.stderr
    assert "template itself is broken" not in result.stderr


@pytest.mark.parametrize("command", [("template", "render", "--messages", "chat.json"), ("generate", "hi")])
def test_an_empty_template_name_is_refused_not_read_as_the_default(run_cli, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text(json.dumps(HI_MESSAGES))
    result = run_cli(*command, "--template-name", "")
    assert result.exit_code == 2, result.output
    assert "--template-name" in result.output and "is empty" in result.output
