"""What an --input line may hold: read by the same reader as `template render --messages`, and
anything else is that line's error record, naming it, never dropped or read as something else."""

from __future__ import annotations

import json

import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
TOOLS_TEMPLATE = (
    "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
)


def _one(line: dict, **kw):
    from sgcli.batch.requests import read_requests

    (item,) = read_requests(json.dumps(line).encode(), "in.jsonl", **kw)
    return item


def _bad(line: dict, **kw) -> str:
    from sgcli.batch.requests import BadLine

    item = _one(line, **kw)
    assert isinstance(item, BadLine), item
    assert str(item.location) == "in.jsonl:1:1"
    return item.message


def test_an_empty_messages_list_is_that_lines_error_as_in_template_render():
    assert "'messages' must be a non-empty list" in _bad({"id": "e", "messages": []})


def test_an_assistant_tool_call_without_content_is_read_as_template_render_reads_it():
    from sgcli.batch.requests import Request

    chat = [
        {"role": "user", "content": "w"},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]},
        {"role": "tool", "content": "1"},
    ]
    assert isinstance(_one({"id": "tc", "messages": chat}), Request)


def test_a_bad_message_is_named_by_its_index():
    message = _bad({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]})
    assert "'messages'[1] has no 'role' string" in message
    assert "'messages'[0] must be an object" in _bad({"messages": ["hi"]})


def test_a_typo_of_a_missing_key_is_that_lines_error_other_keys_are_left_alone():
    message = _bad({"id": 1, "prompt": "a", "tool": []})
    assert "'tool'? Did you mean 'tools'?" in message
    assert "'promt'? Did you mean 'prompt'?" in _bad({"id": 1, "promt": "a"})
    # a dataset's own fields beside the request are the user's, not a mistake: id is optional, so an
    # id-like key (GLUE's idx, a MongoDB _id, prompt_id) is never one, nor 'message' beside a prompt
    from sgcli.batch.requests import Request

    for line in ({"idx": 0, "prompt": "a"}, {"_id": 1, "prompt_id": 2, "message": "m", "prompt": "a", "label": 1}):
        assert isinstance(_one(line), Request), line


@pytest.mark.parametrize("tools, needle", [({"a": 1}, "'tools' must be a list"), ([1], "'tools'[0] must be an object")])
def test_bad_tools_are_that_lines_error(tools, needle):
    assert needle in _bad({"messages": [{"role": "user", "content": "a"}], "tools": tools})


def test_a_lines_tools_reach_the_template_as_template_render_passes_them(tmp_path, smol_tokenizer):
    from helpers import tokenizer_folder

    from sgcli.batch.requests import PromptOptions, prompt_key, start_prompt, start_prompts
    from sgcli.tokenizers import load_tokenizer

    tok = load_tokenizer(str(tokenizer_folder(tmp_path / "tok", smol_tokenizer, TOOLS_TEMPLATE)))
    messages = [{"role": "user", "content": "weather?"}]
    req = _one({"id": "t", "messages": messages, "tools": TOOLS})
    bare = _one({"id": "b", "messages": messages})
    prompt = start_prompt(tok, PromptOptions(), req).result()
    assert prompt.text == tok.render_prompt(messages, tools=TOOLS).text and "get_weather" in prompt.text
    assert prompt_key(req, PromptOptions()) != prompt_key(bare, PromptOptions())
    rendered = start_prompts(tok, PromptOptions(), [req, bare]).result()
    assert prompt_key(req, PromptOptions()) not in rendered  # rendered in process, with its own tools
    assert "get_weather" not in rendered[prompt_key(bare, PromptOptions())].text


def test_a_lines_tools_go_to_the_server():
    from sgcli.batch.requests import Request
    from sgcli.batch.sampling import SamplingParams
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.serving import get_dialect
    from sgcli.serving.client import ClientOptions
    from sgcli.serving.runner import EngineJob

    spec = ConstraintSpec(Kind.REGEX, "a", "--regex")
    job = EngineJob("vllm", get_dialect("vllm"), spec, SamplingParams(), ClientOptions("http://x"))
    messages = [{"role": "user", "content": "hi"}]
    assert job.call(Request(1, None, messages, tools=TOOLS)).body["tools"] == TOOLS
    assert "tools" not in job.call(Request(1, None, messages)).body


@pytest.mark.parametrize(
    "line, needle",
    [
        ({"messages": [{"role": "user", "content": "a"}]}, "without the chat template that 'messages' needs"),
        ({"prompt": "a", "tools": TOOLS}, "without the chat template that 'tools' needs"),
    ],
)
def test_a_chat_line_under_raw_is_that_lines_error_not_templated(line, needle):
    from sgcli.batch.requests import Request

    assert "--raw sends a 'prompt' as is" in _bad(line, raw=True) and needle in _bad(line, raw=True)
    assert isinstance(_one({"prompt": "a"}, raw=True), Request)


@pytest.mark.parametrize("end", [b"\r", b"\r\n", b"\n"])
def test_every_line_end_an_editor_writes_separates_records(end):
    """A file saved with classic Mac line ends (a lone CR) is three records, not one invalid line."""
    from sgcli.batch.requests import BadLine, Request

    data = end.join([b'{"prompt": "a"}', b"not json", b'{"id": 7, "prompt": "c"}']) + end
    items = list(read_requests_of(data))
    assert [type(i) for i in items] == [Request, BadLine, Request]
    assert [i.prompt for i in items if isinstance(i, Request)] == ["a", "c"]
    assert str(items[1].location) == "in.jsonl:2:1" and items[2].id == 7


def read_requests_of(data: bytes):
    from sgcli.batch.requests import read_requests

    return read_requests(data, "in.jsonl")


@pytest.mark.parametrize(
    "line, key, col",
    [
        (b'{"prompt": "a", "prompt": "b"}', "prompt", 17),
        (b'{"messages": [{"role": "user", "content": "x", "role": "system"}]}', "role", 48),
    ],
)
def test_a_key_given_twice_is_that_lines_error_not_one_of_them_silently(line, key, col):
    """json keeps the last of two equal keys and other readers the first: neither is a guess to make."""
    from sgcli.batch.requests import BadLine

    (item,) = read_requests_of(line + b"\n")
    assert isinstance(item, BadLine) and f"key '{key}' appears twice" in item.message
    assert str(item.location) == f"in.jsonl:1:{col}"


@pytest.mark.parametrize(
    "message, needle",
    [
        ({"role": "user", "contnet": "x"}, "a key 'contnet' that chat templates do not read. Did you mean 'content'?"),
        ({"role": "usr", "content": "x"}, "the role 'usr', not one of system, user, assistant"),
    ],
)
def test_a_typo_in_a_message_is_that_lines_error_not_the_templates(message, needle):
    """`contnet` reached the template, whose error named sgcli's cached chat_template.jinja, line 4; `usr` passed."""
    assert needle in _bad({"id": "t", "messages": [message]})


def test_a_role_of_the_templates_own_passes():
    from sgcli.batch.requests import Request

    assert isinstance(_one({"messages": [{"role": "ipython", "content": "x"}]}), Request)


def test_a_raw_control_character_is_named_whole():
    """json's message stopped at "Invalid control character at"."""
    from sgcli.batch.requests import BadLine

    (item,) = read_requests_of(b'{"prompt": "a\x00b"}\n')
    assert isinstance(item, BadLine) and str(item.location) == "in.jsonl:1:14"
    said = "invalid JSON: a raw control character (U+0000) inside a string, which JSON writes as \\u0000"
    assert item.message == said
