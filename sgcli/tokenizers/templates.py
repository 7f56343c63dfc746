"""Chat templates: choosing one and saying which; rendering is the template's own library's.

Hugging Face templates are rendered by transformers' `render_jinja_template` (the function
`tokenizer.apply_chat_template` calls), so sandbox globals, reasoning-field aliasing and
template variables never drift from transformers; `mistral:*` tokenizers use mistral-common's
own chat encoding (see `sgcli.tokenizers.mistral`). sgcli keeps choosing the template,
reporting which one it used, and bounding the render: a template is untrusted input, so it
runs with a time limit and an address-space ceiling (in the main thread, where the CLI renders)
and an output-size limit, and every way it can fail is a `UserError` (exit 2) naming the
template, as SGLang answers with a 400. Every render runs in a forked child (see
`sgcli.tokenizers.render_child`), whose time limit ends the process: C-level work in a template
never reaches the in-process signal handler.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sgcli.errors import UserError, did_you_mean
from sgcli.lone_surrogates import lone_surrogate
from sgcli.tokenizers.surrogates import check_utf8

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    source: str
    how_chosen: str  # a sentence for the user: why this template
    file: str = ""  # the file it was read from (chat_template.jinja, tokenizer_config.json), if known


def select_template(raw: Any, name: str | None, *, origin: str, tools: bool = False) -> ChatTemplate | None:
    """Pick a template from the forms `tokenizer_config.json` allows.

    `raw` may be a string, a list of `{name, template}`, or an object of named
    templates. Choice order: `name` if given, else `tool_use` for a chat with tools (as
    transformers and vLLM choose), else `default`, else the first.
    """
    if raw is None:
        if name:
            raise UserError(f"{origin} has no chat template, so none named '{name}'", hint="drop --template-name")
        return None
    if isinstance(raw, str):
        if name and name != "default":
            raise UserError(
                f"{origin} has a single chat template; there is none named '{name}'", hint="drop --template-name"
            )
        return ChatTemplate("default", raw, "the tokenizer's only chat template")
    if isinstance(raw, list):
        named = {}
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "template" not in item:
                raise UserError(f"{origin}: chat_template[{i}] must be an object with 'name' and 'template'")
            named[item["name"]] = item["template"]
    elif isinstance(raw, dict):
        named = dict(raw)
    else:
        raise UserError(f"{origin}: chat_template must be a string, a list or an object, not {type(raw).__name__}")
    for key, source in named.items():
        if not isinstance(source, str):
            raise UserError(f"{origin}: chat template '{key}' must be a string, not {type(source).__name__}")
    if not named:
        if name:
            raise UserError(f"{origin} has no chat template, so none named '{name}'", hint="drop --template-name")
        return None
    if name:
        if name not in named:
            raise UserError(f"{origin} has no chat template named '{name}'", hint="available: " + ", ".join(named))
        return ChatTemplate(name, named[name], f"named by --template-name ({name})")
    if tools and "tool_use" in named:
        return ChatTemplate("tool_use", named["tool_use"], "the template named 'tool_use', for a chat with tools")
    if "default" in named:
        return ChatTemplate("default", named["default"], "the template named 'default'")
    first = next(iter(named))
    return ChatTemplate(first, named[first], f"the first template ('{first}'; none is named 'default')")


def template_names(raw: Any) -> list[str]:
    """The names a tokenizer's templates go by (for listings and hints)."""
    if isinstance(raw, str):
        return ["default"]
    if isinstance(raw, list):
        return [i.get("name") for i in raw if isinstance(i, dict)]
    if isinstance(raw, dict):
        return list(raw)
    return []


def _text_of(content: Any, where: str) -> str:
    if not isinstance(content, list):
        return "" if content is None else str(content)
    texts = []
    for j, part in enumerate(content):  # OpenAI content parts
        if isinstance(part, dict) and "text" in part:
            if not isinstance(part["text"], str):
                raise UserError(
                    f"{where}.content[{j}].text must be a string, not {type(part['text']).__name__}",
                    hint='a text part is {"type": "text", "text": "..."}',
                )
            texts.append(part["text"])
    return "".join(texts)


def raw_prompt(messages: list[dict]) -> str:
    """The prompt used when a tokenizer has no template: the contents, one per line."""
    text = "\n".join(_text_of(m.get("content"), f"messages[{i}]") for i, m in enumerate(messages))
    check_utf8(text, messages)
    return text


def check_messages(messages: Any, *, where: str = "messages") -> list[dict]:
    """A list of {role, content} objects, or a UserError saying which item is wrong."""
    if not isinstance(messages, list) or not messages:
        raise UserError(
            f"{where} must be a non-empty list of messages", hint='e.g. [{"role": "user", "content": "Hello"}]'
        )
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise UserError(f"{where}[{i}] must be an object with 'role' and 'content', not {type(m).__name__}")
        missing = [k for k in ("role", "content") if k not in m]
        for key in m:  # 'contnet' beside no 'content': the template would fail on the key it lacks, naming itself
            near = did_you_mean(key, missing) if key not in MESSAGE_KEYS else ""
            if near:
                raise UserError(f"{where}[{i}] has a key {key!r} that chat templates do not read.{near}")
        if not isinstance(m.get("role"), str):
            raise UserError(f"{where}[{i}] has no 'role' string", hint="roles are system, user, assistant, tool")
        # a template may take its own roles (ipython): only a near miss; a lone surrogate is its own error later
        if m["role"] not in ROLES and lone_surrogate(m["role"]) is None:
            near = did_you_mean(m["role"], ROLES)
            if near:
                raise UserError(f"{where}[{i}] has the role {m['role']!r}, not one of {', '.join(ROLES)}.{near}")
    return messages


# what OpenAI's chat messages hold, which chat templates read (others are left to the template)
MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "thinking"})
ROLES = ("system", "user", "assistant", "tool", "developer", "function")


def check_tools(tools: Any, *, where: str = "tools") -> list[dict]:
    """A list of tool objects (OpenAI's `tools`), or a UserError saying which item is wrong."""
    if not isinstance(tools, list):
        raise UserError(f"{where} must be a list of tools, not {type(tools).__name__}")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise UserError(f"{where}[{i}] must be an object, not {type(tool).__name__}")
    return tools


RENDER_TIME_S = 10.0  # wall-clock seconds a render may take
RENDER_MEMORY_MB = 1024  # address space a render may add to the process
RENDER_MAX_CHARS = 8_000_000  # a rendered prompt longer than any model's context, many times over


class _TemplateTimeout(Exception):
    pass


def render(
    template: ChatTemplate,
    messages: list[dict],
    *,
    add_generation_prompt: bool = True,
    special_tokens: dict[str, str] | None = None,
    tools: list | None = None,
    template_kwargs: dict[str, Any] | None = None,
    killable: bool = False,
) -> str:
    """Render `messages` with transformers' own renderer, within the limits above; every failure
    (syntax, the template's raise_exception, a Python error inside it, a limit) is exit 2.
    `template_kwargs` (--chat-template-kwargs, e.g. enable_thinking) become template variables,
    as `apply_chat_template(..., **kwargs)` makes them. `killable`: this is a render child, which
    the time limit ends (`_time_limit`)."""
    render_jinja_template = _renderer()
    chat = [{k: v for k, v in m.items() if v is not None} for m in messages]  # as apply_chat_template does
    try:
        with _limits(killable):
            rendered, _ = render_jinja_template(
                [chat],
                tools=tools,
                chat_template=template.source,
                add_generation_prompt=add_generation_prompt,
                **{**(special_tokens or {}), **(template_kwargs or {})},
            )
        text = rendered[0]
    except Exception as exc:  # the template is the user's: whatever it raises is exit 2
        raise _template_error(template, exc) from None
    inputs = {"tools": tools, "template_kwargs": template_kwargs, "special_tokens": special_tokens}
    check_utf8(text, messages, origin=f"chat template '{template.name}'", **inputs)
    if len(text) > RENDER_MAX_CHARS:
        raise UserError(
            f"chat template '{template.name}' rendered {len(text):,} characters, over the limit of "
            f"{RENDER_MAX_CHARS:,}",
            hint="check the template for loops or repetition that grow the prompt",
        )
    return text


def _renderer() -> Callable:
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError as exc:  # the light core has no transformers (nor jinja2)
        from sgcli.extras import import_failure

        raise import_failure(exc, "rendering a chat template") from None
    return render_jinja_template


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Pending(Generic[T]):
    """Work started now and collected later: `result()` waits for it (raising what the work
    raised), `cancel()` drops it when it is no longer wanted."""

    result: Callable[[], T]
    cancel: Callable[[], None] = _nothing

    def then(self, fn: Callable[[T], U]) -> Pending[U]:
        return Pending(lambda: fn(self.result()), self.cancel)

    @staticmethod
    def done(value: T) -> Pending[T]:
        return Pending(lambda: value)


QUOTED_CHARS = 300  # of a template's own error text in a message: `raise_exception('E' * 2e8)` wrote 200 MB


def bounded(text: str, limit: int = QUOTED_CHARS) -> str:
    """`text`, cut to `limit` characters saying how long it was: a template's error text is the template's
    to choose, and went whole to stderr and into every batch record."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters in all)"


def _template_error(template: ChatTemplate, exc: Exception) -> UserError:
    import jinja2

    name = template.name
    if isinstance(exc, jinja2.exceptions.TemplateSyntaxError):  # Jinja gives a line, no column
        return UserError(
            f"chat template '{name}' has a syntax error at line {exc.lineno}{_of_file(template)}: "
            f"{bounded(exc.message or '')}",
            hint=f"fix the template in {_fix_in(template)}",
        )
    of = _of_file(template)
    at = f" ({of.removeprefix(' of ')})" if of else ""
    if isinstance(exc, _TemplateTimeout):
        return UserError(f"chat template '{name}' took more than {RENDER_TIME_S:g} s to render{at}", hint=_LOOPS)
    if isinstance(exc, MemoryError):
        return UserError(f"chat template '{name}' needed more than {RENDER_MEMORY_MB} MB to render{at}", hint=_LOOPS)
    if isinstance(exc, RecursionError):
        return UserError(f"chat template '{name}' recursed too deeply (a macro calling itself?){at}", hint=_LOOPS)
    line = _template_line(exc)
    where = f" (line {line}{of})" if line else at
    if isinstance(exc, (jinja2.exceptions.UndefinedError, jinja2.exceptions.SecurityError)):
        # the template's own fault, whatever the messages: "check the messages" sent users to the wrong file
        kind = "is not allowed in the sandbox" if isinstance(exc, jinja2.exceptions.SecurityError) else "is undefined"
        return UserError(
            f"chat template '{name}' is broken: {bounded(str(exc))}{where}",
            hint=f"something the template uses {kind}: fix the template in {_fix_in(template)}, or pick another "
            "(--template-name, --raw)",
        )
    if isinstance(exc, jinja2.exceptions.TemplateError):  # raise_exception(...)
        return UserError(
            f"chat template '{name}' rejected the messages: {bounded(str(exc))}{where}",
            hint="check the roles, order and contents of the messages",
        )
    return UserError(
        f"chat template '{name}' failed on these messages: {type(exc).__name__}: {bounded(str(exc))}{where}",
        hint="each message needs 'role' and 'content'; if they have them, the template itself is broken",
    )


def _of_file(template: ChatTemplate) -> str:
    if not template.file:
        return ""
    if template.file.endswith(".gguf"):
        return f" of {_fix_in(template)}"
    return f" of {template.file}" if template.file.endswith(".jinja") else f" of the chat_template in {template.file}"


def _fix_in(template: ChatTemplate) -> str:
    """Where the user edits the template: its file, and for a .gguf the metadata key (llama.cpp keeps named
    templates as `tokenizer.chat_template.NAME`), never the converted copy in sgcli's cache."""
    if not template.file:
        return "tokenizer_config.json / chat_template.jinja"
    if template.file.endswith(".gguf"):
        key = "tokenizer.chat_template" + ("" if template.name == "default" else f".{template.name}")
        return f"{template.file}, metadata key {key}"
    return template.file


def _template_line(exc: BaseException) -> int | None:
    """The template line a render failed at: Jinja rewrites the traceback so that the compiled
    template's frames carry the template's own line numbers, under the file name `<template>`."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


_LOOPS = "the template is untrusted input; check it for unbounded loops, repetition or recursion"


@contextlib.contextmanager
def _limits(killable: bool = False) -> Iterator[None]:
    """Time and memory limits around a render, in the main thread only: a signal can only be taken
    there, and lowering the address-space limit while other threads allocate could fail them."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _time_limit(RENDER_TIME_S, kill=killable), _memory_limit(RENDER_MEMORY_MB):
        yield


@contextlib.contextmanager
def _time_limit(seconds: float, *, kill: bool = False) -> Iterator[None]:
    """Raise `_TemplateTimeout` inside the render after `seconds` (Jinja renders in Python code, so
    the signal lands between bytecodes). `kill`, in a render child: the signal ends the process
    instead (its default action), which C-level work such as `7**(7**10)`, never reaching a
    bytecode, cannot hold off; the parent reads that death as the time limit."""
    import signal

    if not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise _TemplateTimeout

    previous = signal.signal(signal.SIGALRM, signal.SIG_DFL if kill else expire)
    started, (outer, _) = time.monotonic(), signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # a timer set before (a child's own deadline) runs on
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


@contextlib.contextmanager
def _memory_limit(megabytes: int) -> Iterator[None]:
    """Cap the process's address space at its current size plus `megabytes` while rendering, so
    `{{ 'x' * 10**10 }}` is a MemoryError instead of gigabytes (Linux; elsewhere no ceiling)."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        yield
        return
    ceiling = current + megabytes * 2**20
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    if soft != resource.RLIM_INFINITY and soft <= ceiling:
        yield  # already tighter than ours
        return
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
