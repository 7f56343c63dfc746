"""The tokenizer sgcli works with: a `Vocab`, an encoder and the chat templates."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sgcli.errors import UserError
from sgcli.tokenizers.render_child import render_later, render_many_later
from sgcli.tokenizers.surrogates import check_utf8
from sgcli.tokenizers.templates import ChatTemplate, Pending, raw_prompt, select_template
from sgcli.tokenizers.vocab import Vocab


@dataclass(frozen=True)
class RenderedPrompt:
    """A chat rendered for the model: its text, its ids, and how the template was chosen."""

    text: str
    ids: list[int]
    template: ChatTemplate | None  # None: no template, the raw prompt was used
    notices: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # about this chat's prompt (`prompt_warnings`): its record says them too


def prompt_warnings(
    tpl: ChatTemplate | None, messages: list[dict], text: str, template_kwargs: dict | None = None
) -> tuple[str, ...]:
    """What a rendered prompt shows the template did not mean: the chat dropped, parts written as a
    list, variables given that it never reads."""
    return (
        dropped_prompt(tpl, messages, text)
        + parts_as_a_list(tpl, messages, text)
        + unread_variables(tpl, template_kwargs)
    )


def unread_variables(tpl: ChatTemplate | None, template_kwargs: dict | None) -> tuple[str, ...]:
    """A warning for each --chat-template-kwargs variable the template's source never names: Jinja
    renders on without it, so a misspelt `enable_thinking`, or another family's variable, changed
    nothing without a word."""
    if tpl is None or not template_kwargs:
        return ()
    unread = [k for k in template_kwargs if not re.search(rf"(?<![\w.]){re.escape(k)}(?!\w)", tpl.source)]
    if not unread:
        return ()
    names = ", ".join(f"'{k}'" for k in unread)
    return (
        f"chat template '{tpl.name}' never reads {names} (--chat-template-kwargs): it renders as if "
        "not given; check the name against the variables the template reads",
    )


def parts_as_a_list(tpl: ChatTemplate | None, messages: list[dict], text: str) -> tuple[str, ...]:
    """A warning where a template that reads `content` as a string wrote a list of parts
    (`[{"type": "text", ...}]`, OpenAI's form) as Python's text of the list, as Jinja prints one: the
    model reads "[{'type': 'text', 'text': ...}]". Only said: vLLM joins the text parts for such
    templates, transformers renders them as sgcli does."""
    if tpl is None:
        return ()
    listed = [i for i, m in enumerate(messages) if isinstance(m.get("content"), list) and str(m["content"]) in text]
    if not listed:
        return ()
    where = ", ".join(f"messages[{i}].content" for i in listed[:3]) + (", ..." if len(listed) > 3 else "")
    return (
        f"chat template '{tpl.name}' reads each message's content as a string, and wrote {where}, a list of "
        "parts, as Python's text of the list (\"[{'type': 'text', ...}]\"): give the content as one string",
    )


def dropped_prompt(tpl: ChatTemplate | None, messages: list[dict], text: str) -> tuple[str, ...]:
    """A warning where a template's prompt is empty or lacks the last user message's text (a plain string):
    such a template (a fixed text, an empty file) sent the model nothing of the chat, without a word. Only
    said, not refused: a template may rewrite what it quotes."""
    if tpl is None:
        return ()
    if not text.strip():
        return (f"chat template '{tpl.name}' rendered an empty prompt: the messages never reach the model",)
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)
    if not isinstance(last, str) or not last.strip():
        return ()
    import json

    if last.strip() in text or json.dumps(last.strip(), ensure_ascii=False)[1:-1] in text:
        return ()
    return (
        f"the prompt chat template '{tpl.name}' rendered does not hold the last user message's text: "
        "the model never sees it (check the template, or pass --raw)",
    )


@dataclass(eq=False)
class Tokenizer:
    vocab: Vocab
    name: str
    encode_fn: Callable[[str], list[int]]  # prompt encoding (SentencePiece's dummy prefix included)
    raw_chat_template: Any = None  # str | list | dict | None, as in tokenizer_config.json
    special_tokens: dict = field(default_factory=dict)  # bos_token -> "<s>", ... (the template's variables)
    add_bos: bool = False  # whether a raw prompt starts with BOS
    # A library's own chat encoding (mistral-common's for `mistral:*`), used instead of a Jinja
    # template: messages, tools -> prompt ids. None for tokenizers with Jinja templates.
    chat_encoder: Callable[[list[dict], list | None], list[int]] | None = None
    # template name ("*": any) -> the file it was read from, named in its errors; empty where unknown
    template_files: dict[str, Path] = field(default_factory=dict)

    def encode(self, text: str) -> list[int]:
        return self.encode_fn(text)

    def template(self, name: str | None = None, *, tools: bool = False) -> ChatTemplate | None:
        tpl = select_template(self.raw_chat_template, name, origin=self.name, tools=tools)
        file = tpl and self.template_files.get(tpl.name, self.template_files.get("*"))
        return replace(tpl, file=str(file)) if file else tpl

    def template_label(self, name: str | None = None, *, tools: bool = False) -> str:
        """Which chat template a chat goes through, for records: its name, "mistral-common", or "none"."""
        if self.chat_encoder is not None:
            return "mistral-common"
        tpl = self.template(name, tools=tools)
        return tpl.name if tpl is not None else "none"

    def render_chat(
        self,
        messages: list[dict],
        *,
        template_name: str | None = None,
        add_generation_prompt: bool = True,
        tools: list | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> tuple[str, ChatTemplate | None]:
        """The prompt text for `messages`; (text, None) when the tokenizer has no template."""
        text, tpl = self._start_chat(
            messages,
            template_name,
            in_child=False,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            template_kwargs=template_kwargs,
        )
        return text.result(), tpl

    def _start_chat(
        self, messages: list[dict], template_name: str | None, *, in_child: bool, **options
    ) -> tuple[Pending[str], ChatTemplate | None]:
        """The chosen template and its text for `messages`, rendered in a forked child
        (`render_later`, which the kernel can stop) that starts at once (`in_child`: while the caller
        loads the model) or once the renderer is imported here (awaited at once: nothing to overlap);
        the raw prompt where the tokenizer has no template."""
        tpl = self.template(template_name, tools=options.get("tools") is not None)
        if tpl is None:
            return Pending.done(raw_prompt(messages)), None
        options = {"special_tokens": self.special_tokens, **options}
        return render_later(tpl, messages, import_first=not in_child, **options), tpl

    def prompt_ids(self, text: str, *, templated: bool) -> list[int]:
        """Ids for a rendered prompt. Templates write BOS themselves; raw prompts get it if the model wants one."""
        ids = self.encode(text)
        if not templated and self.add_bos and self.vocab.bos_id is not None and ids[:1] != [self.vocab.bos_id]:
            ids = [self.vocab.bos_id] + ids
        if not ids:  # nothing to condition on: start from BOS, as transformers' generate does
            if self.vocab.bos_id is None:
                raise UserError(
                    f"the prompt is empty once rendered and tokenized, and {self.name} has no BOS token to start from",
                    hint="give a non-empty prompt (or a chat template that renders the messages)",
                )
            ids = [self.vocab.bos_id]
        return ids

    def render_prompt(self, messages: list[dict], *, template_name: str | None = None, **options) -> RenderedPrompt:
        """Text and ids exactly as a generation would send them (`template render` shows this);
        `options` are render_chat's (add_generation_prompt, tools, template_kwargs)."""
        return self.start_render_prompt(messages, template_name=template_name, in_child=False, **options).result()

    def start_render_prompt(
        self, messages: list[dict], *, template_name: str | None = None, in_child: bool = True, **options
    ) -> Pending[RenderedPrompt]:
        """`render_prompt`, started now: a Jinja template renders in a forked child (`render_later`)
        while the caller loads the model. Errors the caller can find at once (a template name that is
        not there) are raised here; the render's own come from `result()`."""
        if self.chat_encoder is not None:
            if options.get("template_kwargs"):
                raise UserError(
                    f"{self.name} encodes chats with mistral-common, which takes no template variables",
                    hint="drop --chat-template-kwargs",
                )
            return Pending.done(self._encoded_chat(messages, template_name, options.get("tools")))
        text, tpl = self._start_chat(messages, template_name, in_child=in_child, **options)
        notices = () if tpl is not None else (f"{self.name} has no chat template: the prompt is sent as is",)

        def done(t: str) -> RenderedPrompt:
            ids = self.prompt_ids(t, templated=tpl is not None)
            said = prompt_warnings(tpl, messages, t, options.get("template_kwargs"))
            return RenderedPrompt(t, ids, tpl, notices, said)

        return text.then(done)

    def start_render_many(
        self, chats: list[list[dict]], *, template_name: str | None = None, template_kwargs: dict | None = None
    ) -> Pending[list | None]:
        """`render_prompt` of many chats (a batch's), started now in one forked child where the
        tokenizer renders with a Jinja template (`render_many_later`). `result()`: per chat its
        RenderedPrompt or the UserError its render raised; None where there is nothing to gain
        (no template, mistral-common's encoder) or the child failed: the caller renders each
        chat itself."""
        try:
            tpl = self.template(template_name) if self.chat_encoder is None else None
        except UserError:  # a template name that is not there: each request says so, rendered in process
            return Pending.done(None)
        if tpl is None or not chats:
            return Pending.done(None)
        options = {"special_tokens": self.special_tokens, "template_kwargs": template_kwargs}
        texts = render_many_later(tpl, chats, **options)

        def prompts(found: list | None) -> list | None:
            if found is None:
                return None
            return [
                t if isinstance(t, UserError) else self._rendered(t, tpl, m, template_kwargs)
                for t, m in zip(found, chats)
            ]

        return texts.then(prompts)

    def _rendered(
        self, text: str, tpl: ChatTemplate, messages: list[dict], template_kwargs: dict | None
    ) -> RenderedPrompt | UserError:
        """One chat of a batch as `start_render_many` gives it: the prompt, or the error of its ids
        alone (an empty one), so the other chats are still answered."""
        try:
            return RenderedPrompt(
                text,
                self.prompt_ids(text, templated=True),
                tpl,
                (),
                prompt_warnings(tpl, messages, text, template_kwargs),
            )
        except UserError as exc:
            return exc

    def _encoded_chat(self, messages: list[dict], template_name: str | None, tools: list | None) -> RenderedPrompt:
        if template_name:
            raise UserError(
                f"{self.name} encodes chats with mistral-common, not a named template ('{template_name}')",
                hint="drop --template-name",
            )
        check_utf8(None, messages, tools=tools)  # mistral-common would encode a lone surrogate as U+FFFD
        ids = self.chat_encoder(messages, tools)
        text = b"".join(self.vocab.tokens[i] for i in ids).decode("utf-8", errors="replace")
        how = f"mistral-common's own chat encoding for {self.name}"
        return RenderedPrompt(text, ids, ChatTemplate("mistral-common", "", how))
