"""`sgcli template render`: template forms, choice, the raw-prompt fallback, and every error path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = "TOOLS:{% for m in messages %}{{ m.content }}{% endfor %}"
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def make_folder(tmp_path, smol_tokenizer):
    """A tokenizer folder (SmolLM2's tokenizer.json) with the given config and extra files."""
    count = iter(range(1000))

    def make(chat_template=None, files: dict | None = None, **config) -> Path:
        folder = tmp_path / f"tok{next(count)}"
        folder.mkdir()
        (folder / "tokenizer.json").symlink_to(smol_tokenizer.vocab.source)
        cfg = {"eos_token": "<|im_end|>", "bos_token": "<|im_start|>", **config}
        if chat_template is not None:
            cfg["chat_template"] = chat_template
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
        for name, text in (files or {}).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        return folder

    return make


@pytest.fixture
def messages(tmp_path):
    def write(data, name="messages.json") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path

    return write


def render(run_cli, folder, msgs, *extra):
    return run_cli("template", "render", "--tokenizer", folder, "--messages", msgs, *extra)


def test_string_form(run_cli, make_folder, messages):
    result = render(run_cli, make_folder(CHATML), messages(HI))
    assert result.exit_code == 0, result.output
    assert result.stdout == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert "template: default" in result.stderr and "only chat template" in result.stderr


def test_no_generation_prompt(run_cli, make_folder, messages):
    result = render(run_cli, make_folder(CHATML), messages(HI), "--no-add-generation-prompt")
    assert result.stdout == "<|im_start|>user\nHi<|im_end|>\n"


def test_object_form_uses_default_and_says_so(run_cli, make_folder, messages):
    folder = make_folder({"tool_use": TOOLS, "default": CHATML})  # 'default' wins although not first
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<|im_start|>user\nHi")
    assert "template: default" in result.stderr and "the template named 'default'" in result.stderr
    named = render(run_cli, folder, messages(HI), "--template-name", "tool_use")
    assert named.stdout == "TOOLS:Hi" and "named by --template-name" in named.stderr


def test_object_form_without_default_uses_the_first(run_cli, make_folder, messages):
    result = render(run_cli, make_folder({"tool_use": TOOLS, "rag": CHATML}), messages(HI))
    assert result.stdout == "TOOLS:Hi"
    assert "the first template ('tool_use'" in result.stderr


def test_list_form(run_cli, make_folder, messages):
    folder = make_folder([{"name": "tool_use", "template": TOOLS}, {"name": "default", "template": CHATML}])
    assert render(run_cli, folder, messages(HI)).stdout.startswith("<|im_start|>user")
    assert render(run_cli, folder, messages(HI), "--template-name", "tool_use").stdout == "TOOLS:Hi"


def test_template_files_take_priority_over_the_config(run_cli, make_folder, messages):
    folder = make_folder(
        "CONFIG", files={"chat_template.jinja": CHATML, "additional_chat_templates/tool_use.jinja": TOOLS}
    )
    result = render(run_cli, folder, messages(HI))
    assert result.stdout.startswith("<|im_start|>user")
    said = "its chat_template ('default') is not used: the .jinja files beside it take its place"
    assert f"{folder / 'tokenizer_config.json'}: {said}" in result.stderr  # an edit there changed nothing unsaid
    assert render(run_cli, folder, messages(HI), "--template-name", "tool_use").stdout == "TOOLS:Hi"


def test_a_config_template_equal_to_the_jinja_file_is_not_mentioned(run_cli, make_folder, messages):
    folder = make_folder(CHATML, files={"chat_template.jinja": CHATML})  # as transformers 4.4x saved both
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 0 and "is not used" not in result.stderr


def test_missing_template_uses_the_raw_prompt_with_a_notice(run_cli, make_folder, messages):
    msgs = messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    result = render(run_cli, make_folder(None), msgs, "--json", "--tokens")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["template"] is None and record["prompt"] == "Be brief.\nHi"
    assert "has no chat template" in result.stderr
    assert record["ids"] and record["num_tokens"] == len(record["ids"])


def test_a_template_that_writes_a_list_of_parts_as_python_text_says_so(run_cli, make_folder, messages):
    """OpenAI's content parts under a template that prints `message['content']`: the model read
    "[{'type': 'text', 'text': 'Hi'}]", without a word."""
    parts = [{"type": "text", "text": "Hi"}]
    result = render(run_cli, make_folder(CHATML), messages([{"role": "user", "content": parts}]), "--json")
    assert result.exit_code == 0, result.output
    assert str(parts) in json.loads(result.stdout)["prompt"]  # as transformers renders it too
    assert "wrote messages[0].content, a list of parts, as Python's text of the list" in result.stderr
    plain = render(run_cli, make_folder(CHATML), messages(HI))
    assert "list of parts" not in plain.stderr


def test_a_template_variable_the_template_never_reads_is_named(run_cli, make_folder, messages):
    """`--chat-template-kwargs '{"enable_thinkng": false}'` rendered as if not given, without a word."""
    thinking = CHATML + "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
    folder = make_folder(thinking)
    typo = render(run_cli, folder, messages(HI), "--chat-template-kwargs", '{"enable_thinkng": false}')
    assert typo.exit_code == 0, typo.output
    assert "chat template 'default' never reads 'enable_thinkng' (--chat-template-kwargs)" in typo.stderr
    right = render(run_cli, folder, messages(HI), "--chat-template-kwargs", '{"enable_thinking": false}')
    assert right.stdout.rstrip().endswith("<think></think>") and "never reads" not in right.stderr


@pytest.mark.parametrize("text", [5, None])
def test_missing_template_refuses_a_text_part_that_is_not_a_string(run_cli, make_folder, messages, text):
    msgs = messages([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": text}]}])
    result = render(run_cli, make_folder(None), msgs)
    assert result.exit_code == 2, result.output  # was exit 3: a TypeError in str.join
    assert "messages[0].content[1].text must be a string" in result.stderr


def test_tokens_are_the_prompt_ids(run_cli, make_folder, messages, smol_tokenizer):
    result = render(run_cli, make_folder(CHATML), messages(HI), "--tokens")
    prompt, ids = result.stdout.rstrip("\n").rsplit("\n", 1)
    assert [int(i) for i in ids.split()] == smol_tokenizer.encode(prompt + "\n")


def test_same_renderer_as_generate(run_cli, messages, smol_tokenizer):
    """`template render` and a generation session render the same text and ids."""
    from sgcli.engine.session import PromptOptions, Request, Session

    result = run_cli("template", "render", "--messages", messages(HI), "--json", "--tokens")
    record = json.loads(result.stdout)
    session = Session(
        lm=None, tokenizer=smol_tokenizer, compiled=None, params=None, max_tokens=1, prompt_options=PromptOptions()
    )
    text, ids, *_ = session.render(Request(None, prompt="Hi"))
    assert record["template"] == "default"
    assert (record["prompt"], record["ids"]) == (text, ids)


@pytest.mark.parametrize(
    "template, message",
    [
        ("{% for m in messages %}{{ m.content }", "syntax error at line 1"),
        (
            "{% if messages[0].role != 'system' %}"
            "{{ raise_exception('Conversations must start with a system message') }}"
            "{% endif %}",
            "Conversations must start with a system message",
        ),
        (
            "{% for m in messages %}{% if m.role == 'assistant' and not m.content %}"
            "{{ raise_exception('Assistant message must have a content') }}{% endif %}{% endfor %}",
            "Assistant message must have a content",
        ),
        ("{{ messages[0].content + 1 }}", "failed on these messages"),
    ],
)
def test_template_errors_exit_2_with_the_templates_message(run_cli, make_folder, messages, template, message):
    msgs = messages([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}])
    result = render(run_cli, make_folder(template), msgs)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_template_errors_name_the_file_and_the_template_line(run_cli, make_folder, messages):
    """Syntax errors named neither file (only `line N`; Jinja gives no column), runtime errors no line."""
    folder = make_folder("a\n{% for m in messages %}{{ m.content }\n{% endfor %}")
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    assert f"syntax error at line 2 of the chat_template in {folder / 'tokenizer_config.json'}:" in result.stderr
    folder = make_folder("CONFIG", files={"chat_template.jinja": "a\n\n{{ raise_exception('no') }}"})
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    assert f"rejected the messages: no (line 3 of {folder / 'chat_template.jinja'})" in result.stderr
    result = render(run_cli, make_folder("x\n{{ messages[5].content + 1 }}"), messages(HI))
    assert result.exit_code == 2 and "(line 2 of the chat_template in" in result.stderr


def test_unreadable_template_files_are_named(run_cli, make_folder, messages):
    """A non-UTF-8 chat_template.jinja was 'cannot build a vocabulary'; a tokenizer_config.json holding
    a JSON array was read as empty (no template, silently)."""
    folder = make_folder("x")
    (folder / "chat_template.jinja").write_bytes(b"a\xffb")
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    assert f"{folder / 'chat_template.jinja'} is not UTF-8 text (byte 1" in result.stderr
    assert "vocabulary" not in result.stderr
    folder = make_folder()
    (folder / "tokenizer_config.json").write_text("[1, 2]")
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    assert f"{folder / 'tokenizer_config.json'} must hold a JSON object, not list" in result.stderr


@pytest.mark.parametrize(
    "place", ["chat_template.jinja", "additional_chat_templates/tool_use.jinja", "tokenizer_config.json"]
)
@pytest.mark.parametrize("what", ["a directory", "a link to /dev/zero", "a named pipe", "too large", "a broken link"])
def test_a_template_file_that_is_not_a_readable_text_file_is_exit_2_naming_it(
    run_cli, make_folder, messages, monkeypatch, place, what
):
    """A chat_template.jinja that was a folder, a FIFO or a link to /dev/zero was taken for no template: the
    prompt went out raw, exit 0. Each is exit 2 naming the file and why, before any model loads, and read no
    further than the limit (/dev/zero was read to the end where the name was found)."""
    import os

    from helpers import bounded_hang

    from sgcli.tokenizers import files

    limit = 8 << 20  # over the tokenizer.json beside it
    monkeypatch.setattr(files, "TOKENIZER_FILE_MAX_BYTES", limit)  # the real one is 64 MiB
    folder = make_folder(CHATML)
    path = folder / place
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    if what == "a directory":
        path.mkdir()
    elif what == "a link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif what == "a named pipe":
        os.mkfifo(path)
    elif what == "too large":
        path.write_bytes(b" " * (limit + 1))
    else:
        path.symlink_to(folder / "missing.jinja")
    why = {
        "a directory": "a directory, not a regular file",
        "a link to /dev/zero": "a device, not a regular file",
        "a named pipe": "a named pipe (FIFO), not a regular file",
        "too large": f"is over {limit:,} bytes, more than any tokenizer file sgcli reads",
        "a broken link": "No such file or directory",
    }[what]
    with bounded_hang(30):
        result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    expected = f"{path} {why}" if what == "too large" else f"cannot read {path}: {why}"
    assert expected in result.stderr


@pytest.mark.parametrize(
    "data, message",
    [
        ('[{"role": "user", "content": "Hi"},]', "not valid JSON"),
        ('{"role": "user"}', "without 'messages'"),
        ("[]", "non-empty list"),
        ('[{"content": "Hi"}]', "messages[0] has no 'role'"),
        ('["Hi"]', "messages[0] must be an object"),
        ('[{"role": "user", "content": NaN}]', "NaN and Infinity are not JSON"),  # hostile_inputs.py
        ("[" * 100_000 + "]" * 100_000, "nested more than 512 levels"),  # was RecursionError, exit 3
    ],
)
def test_bad_messages_exit_2(run_cli, make_folder, messages, data, message):
    result = render(run_cli, make_folder(CHATML), messages(data))
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_json_error_is_positioned(run_cli, make_folder, messages):
    result = render(run_cli, make_folder(CHATML), messages('[\n  {"role": "user",}\n]', name="bad.json"))
    assert result.exit_code == 2 and "bad.json:2:" in result.stderr


@pytest.mark.parametrize(
    "template, args, message",
    [
        ({"default": CHATML}, ["--template-name", "rag"], "no chat template named 'rag'"),
        (CHATML, ["--template-name", "rag"], "single chat template"),
        (None, ["--template-name", "rag"], "has no chat template"),
        ([{"template": CHATML}], [], "must be an object with 'name' and 'template'"),
        ({"default": 3}, [], "must be a string"),
    ],
)
def test_template_choice_errors_exit_2(run_cli, make_folder, messages, template, args, message):
    result = render(run_cli, make_folder(template), messages(HI), *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_model_and_tokenizer_together_or_missing_file_exit_2(run_cli, messages, make_folder):
    both = run_cli("template", "render", "--model", "x", "--tokenizer", "y", "--messages", messages(HI))
    assert both.exit_code == 2 and "not both" in both.stderr
    missing = run_cli("template", "render", "--tokenizer", make_folder(CHATML), "--messages", "nope.json")
    assert missing.exit_code == 2 and "messages file not found" in missing.stderr


SURROGATE = [{"role": "user", "content": "a\ud800b"}]


@pytest.mark.parametrize(
    "template, msgs, extra, source",
    [
        (CHATML + "\ud800", HI, (), "chat template 'default' puts a lone surrogate"),
        (CHATML, SURROGATE, (), "messages[0] holds a lone surrogate"),
        (CHATML, [{"role": "user\ud800", "content": "a"}], (), "messages[0] holds a lone surrogate"),
        ("{{ x }}" + CHATML, HI, ("--chat-template-kwargs", '{"x": "\\ud800"}'), "--chat-template-kwargs holds"),
        (None, SURROGATE, (), "messages[0] holds a lone surrogate"),  # no template: the raw prompt
    ],
)
def test_a_lone_surrogate_in_the_prompt_is_refused_naming_its_source(
    run_cli, make_folder, messages, template, msgs, extra, source
):
    """A JSON "\\ud800" escape parses to a lone surrogate, which the tokenizer cannot encode: exit 3 before."""
    result = render(run_cli, make_folder(template), messages(msgs), *extra)
    assert result.exit_code == 2, result.output
    assert source in result.stderr and "surrogate pair" in result.stderr


def test_a_lone_surrogate_is_refused_in_the_render_child_and_by_mistral_common(make_folder):
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(make_folder(CHATML)))
    with pytest.raises(UserError, match=r"messages\[0\] holds a lone surrogate"):
        tok.start_render_prompt(SURROGATE).result()
    first, second = tok.start_render_many([SURROGATE, HI]).result()  # a batch: that chat alone fails
    assert isinstance(first, UserError) and "messages[0] holds a lone surrogate" in first.message
    assert second == tok.render_prompt(HI)
    with pytest.raises(UserError, match=r"messages\[0\] holds a lone surrogate"):  # it encoded U+FFFD
        load_tokenizer("mistral:tekken").render_prompt(SURROGATE)


def test_a_chat_with_tools_goes_through_the_tool_use_template(run_cli, make_folder, messages):
    """As transformers' and vLLM's get_chat_template choose: sgcli had rendered 'default' and dropped the tools."""
    folder = make_folder({"default": CHATML, "tool_use": "TOOLS:{{ tools | length }}:{{ messages[0].content }}"})
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    result = render(run_cli, folder, messages({"messages": HI, "tools": tools}))
    assert result.exit_code == 0, result.output
    assert result.stdout == "TOOLS:1:Hi" and "template: tool_use" in result.stderr
    assert render(run_cli, folder, messages(HI)).stdout.startswith("<|im_start|>user")  # no tools: default


def test_the_template_sees_the_configs_special_tokens_as_transformers_passes_them(run_cli, make_folder, messages):
    """An eos_token guessed by name (for stopping) had been given to the template, and sep/cls/mask and
    additional_special_tokens were not given at all: the prompt differed from apply_chat_template's."""
    template = "[{{ eos_token }}|{{ sep_token }}|{{ cls_token }}|{{ additional_special_tokens | join(',') }}]"
    folder = make_folder(
        template,
        eos_token=None,
        sep_token="<filename>",
        cls_token={"content": "<gh_stars>", "special": True},
        additional_special_tokens=["<reponame>", {"content": "<issue_start>"}],
    )
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 0, result.output
    assert result.stdout == "[|<filename>|<gh_stars>|<reponame>,<issue_start>]"


def test_a_lone_surrogate_in_a_chat_is_refused_in_the_words_of_every_other_reader(make_folder):
    """The tokenizer's check had its own walk and a copy of the hint: one function and one hint now."""
    from sgcli.errors import UserError
    from sgcli.lone_surrogates import LONE_SURROGATE_HINT
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(make_folder(CHATML)))
    with pytest.raises(UserError) as refused:
        tok.render_prompt([{"role": "user", "content": "a\ud800"}])
    assert "messages[0] holds a lone surrogate" in refused.value.message
    assert refused.value.hint == LONE_SURROGATE_HINT


@pytest.mark.parametrize(
    ("config", "key", "shown"),
    [
        ({"bos_token": 5}, "bos_token", "5"),
        ({"bos_token": {"content": 5}}, "bos_token", '{"content": 5}'),
        ({"eos_token": ["</s>"]}, "eos_token", '["</s>"]'),
        ({"pad_token": True}, "pad_token", "true"),
        ({"unk_token": {"special": True}}, "unk_token", '{"special": true}'),
        ({"additional_special_tokens": ["<a>", 7]}, "additional_special_tokens[1]", "7"),
        ({"additional_special_tokens": "<a>"}, "additional_special_tokens", '"<a>"'),
    ],
    ids=["bos-int", "bos-content-int", "eos-list", "pad-bool", "unk-no-content", "extra-int", "extra-string"],
)
def test_a_special_token_that_is_not_text_is_exit_2_naming_the_file_and_key(
    run_cli, make_folder, messages, config, key, shown
):
    """`"bos_token": 5` was dropped, and a template printing it read "the prompt is empty ... and the model
    has no BOS token": the file's value is named instead, as transformers would refuse it."""
    folder = make_folder("{{ bos_token }}{{ eos_token }}{{ messages[0].content }}", **config)
    result = render(run_cli, folder, messages(HI))
    assert result.exit_code == 2, result.output
    assert f"{folder / 'tokenizer_config.json'}: `{key}` is {shown}, not " in result.stderr
    assert "no BOS token" not in result.stderr and "Traceback" not in result.output
