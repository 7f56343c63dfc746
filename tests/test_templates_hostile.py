"""Hostile chat templates (a held-out tour, 2026-12-07): the template's own error text is bounded, GGUF named
templates are read, templates that drop the prompt are warned about, template faults blame the template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]


@pytest.fixture
def make_folder(tmp_path, smol_tokenizer):
    """A tokenizer folder (SmolLM2's tokenizer.json) with the given chat template."""
    count = iter(range(1000))

    def make(chat_template=None) -> Path:
        folder = tmp_path / f"tok{next(count)}"
        folder.mkdir()
        (folder / "tokenizer.json").symlink_to(smol_tokenizer.vocab.source)
        cfg = {"eos_token": "<|im_end|>", "bos_token": "<|im_start|>"}
        if chat_template is not None:
            cfg["chat_template"] = chat_template
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
        return folder

    return make


@pytest.fixture
def msgs(tmp_path) -> Path:
    path = tmp_path / "msgs.json"
    path.write_text(json.dumps(MSGS))
    return path


# --- D0: a template's error text is cut ------------------------------------------------------------


HUGE_RAISE = "{{ raise_exception('E' * 2000000) }}"


def test_a_huge_raise_exception_message_is_cut_saying_how_long_it_was(run_cli, make_folder, msgs):
    """`raise_exception('E' * 200000000)` wrote 200 MB to stderr (27 s, 1.3 GB)."""
    result = run_cli("template", "render", "--tokenizer", make_folder(HUGE_RAISE), "--messages", msgs)
    assert result.exit_code == 2, result.output[:500]
    assert len(result.output) < 2000, len(result.output)
    assert "2,000,000 characters in all" in result.output and "E" * 300 in result.output


def test_a_huge_error_text_is_cut_in_each_batch_record(make_folder):
    """A batch renders its chats in one child: each error (a record) was the whole text, 50 MB a line."""
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(make_folder(HUGE_RAISE)))
    found = tok.start_render_many([MSGS, MSGS]).result()
    assert found is not None and len(found) == 2
    for error in found:
        assert isinstance(error, UserError) and len(error.message) < 1000
        assert "2,000,000 characters in all" in error.message


@pytest.mark.parametrize(
    "template",
    [
        "{{ messages[0].content.no_such_method_" + "x" * 5000 + "() }}",  # a Python error quoting its name
        "{% if " + "x" * 5000 + " %",  # a syntax error quoting the template
    ],
)
def test_any_quoted_template_error_text_is_bounded(make_folder, template):
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    with pytest.raises(UserError) as exc:
        load_tokenizer(str(make_folder(template))).render_chat(MSGS)
    assert len(exc.value.message) < 1000, exc.value.message


# --- D5: GGUF named templates; D6: GGUF template errors name the .gguf and key --------------------------


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    """A tiny byte-level GGUF with the given metadata, converted by the light converter in a fresh cache."""
    from test_gguf_tokenizer_checks import _gguf_bytes, tiny_meta

    import sgcli.tokenizers as tokenizers_pkg

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizers_pkg, "_loaded", {})
    monkeypatch.setattr("sgcli.tokenizers.gguf._transformers_converts", lambda: False)

    def make(name: str, **meta) -> Path:
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(_gguf_bytes(tiny_meta(**meta)))
        return path

    return make


def test_a_gguf_with_only_named_templates_has_a_chat_template(gguf, run_cli, msgs):
    """It was said to have none ("the prompt is sent as is"), and the raw text went to the model."""
    path = gguf("named", **{"tokenizer.chat_template.tool_use": "TOOL:{{ messages[-1].content }}"})
    result = run_cli("template", "render", "--tokenizer", path, "--messages", msgs)
    assert result.exit_code == 0, result.output
    assert "TOOL:Hello there" in result.stdout and "no chat template" not in result.output


def test_a_gguf_named_template_is_picked_by_template_name(gguf, run_cli, msgs):
    """`--template-name tool_use` was refused: "has a single chat template; there is none named 'tool_use'"."""
    path = gguf(
        "named2",
        **{
            "tokenizer.chat_template": "DEFAULT:{{ messages[-1].content }}",
            "tokenizer.chat_template.tool_use": "TOOL:{{ messages[-1].content }}",
            "tokenizer.chat_templates": ["tool_use"],
        },
    )
    result = run_cli("template", "render", "--tokenizer", path, "--messages", msgs, "--template-name", "tool_use")
    assert result.exit_code == 0, result.output
    assert "TOOL:Hello there" in result.stdout
    result = run_cli("template", "render", "--tokenizer", path, "--messages", msgs)
    assert result.exit_code == 0 and "DEFAULT:Hello there" in result.stdout, result.output


def test_a_gguf_template_name_that_is_a_path_is_refused(gguf, run_cli, msgs):
    path = gguf("evil", **{"tokenizer.chat_template.../../x": "{{ 1 }}"})
    result = run_cli("template", "render", "--tokenizer", path, "--messages", msgs)
    assert result.exit_code == 2, result.output
    assert "evil.gguf" in result.output and "tokenizer.chat_template.../../x" in result.output


@pytest.mark.parametrize(
    "name, key", [("default", "tokenizer.chat_template"), ("tool_use", "tokenizer.chat_template.tool_use")]
)
def test_gguf_template_errors_name_the_gguf_and_its_key_not_the_cache(gguf, run_cli, msgs, name, key):
    path = gguf("syntax", **{key: "line 1\nline 2\n{% if %}"})
    args = ("--template-name", name) if name != "default" else ()
    result = run_cli("template", "render", "--tokenizer", path, "--messages", msgs, *args)
    assert result.exit_code == 2, result.output
    assert f"syntax error at line 3 of {path}, metadata key {key}" in result.output
    assert "cache" not in result.output


# --- D8: template faults blame the template -------------------------------------------------------------


@pytest.mark.parametrize(
    "template, what",
    [("{{ foo.bar }}", "is undefined"), ("{{ ''.__class__.__mro__ }}", "is not allowed in the sandbox")],
)
def test_undefined_names_and_sandbox_refusals_blame_the_template(run_cli, make_folder, msgs, template, what):
    folder = make_folder(template)
    result = run_cli("template", "render", "--tokenizer", folder, "--messages", msgs)
    assert result.exit_code == 2, result.output
    assert "chat template 'default' is broken" in result.output and what in result.output
    assert "check the roles" not in result.output and "tokenizer_config.json" in result.output


def test_limit_errors_name_the_templates_file(make_folder):
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    folder = make_folder("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
    with pytest.raises(UserError, match=r"recursed too deeply") as exc:
        load_tokenizer(str(folder)).render_chat(MSGS)
    assert str(folder / "tokenizer_config.json") in exc.value.message


# --- D4: a template that drops the prompt is warned about -------------------------------------------------


@pytest.mark.parametrize(
    "template, said",
    [
        ("", "rendered an empty prompt"),
        ("   \n", "rendered an empty prompt"),
        ("You are a bot. Answer:", "does not hold the last user message's text"),
        ("{{ messages[0].content }}", "does not hold the last user message's text"),
    ],
)
def test_a_template_that_drops_the_users_message_is_warned_about(run_cli, make_folder, msgs, template, said):
    """It rendered to nothing (or to a fixed text) and generate sent that, exit 0, `"warnings": []`."""
    result = run_cli("template", "render", "--tokenizer", make_folder(template), "--messages", msgs)
    assert result.exit_code == 0, result.output
    assert said in result.stderr


@pytest.mark.parametrize(
    "template",
    [
        "{% for m in messages %}{{ m.content }}\n{% endfor %}",
        "{% for m in messages %}{{ m.content | trim }}{% endfor %}",
        "{% for m in messages %}{{ m.content | tojson }}{% endfor %}",
    ],
)
def test_a_template_that_renders_the_users_message_is_not_warned_about(make_folder, template, tmp_path):
    from sgcli.tokenizers import load_tokenizer

    chat = [{"role": "user", "content": ' Say "hi"\nplease '}]
    rendered = load_tokenizer(str(make_folder(template))).render_prompt(chat)
    assert rendered.warnings == ()


def test_a_batch_render_warns_per_chat(make_folder):
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(make_folder("{% if messages[-1].content == 'keep' %}keep{% else %}other{% endif %}")))
    found = tok.start_render_many([[{"role": "user", "content": "keep"}], MSGS]).result()
    assert found[0].warnings == ()
    assert "does not hold the last user message's text" in found[1].warnings[0]


def test_a_dropped_message_reaches_the_prompt_generate_decodes(make_folder):
    """The warning rode only on stderr: the request's Prompt carries it, and its record's `warnings` say it
    (`Session.record(prompt_warnings=...)`)."""
    from sgcli.batch.requests import PromptOptions, Request, start_prompt
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(make_folder("You are a bot. Answer:")))
    prompt = start_prompt(tok, PromptOptions(), Request(None, "What is 2+2?")).result()
    assert len(prompt.warnings) == 1 and "does not hold the last user message's text" in prompt.warnings[0]
