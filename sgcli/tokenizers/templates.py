"""Chat templates: choosing one, and rendering it the way Hugging Face tokenizers do.

sgcli renders templates itself (sandboxed Jinja with the helpers transformers exposes)
so that `template render` and `generate` produce byte-identical prompts, and so that
rendering needs no model framework. Every way a template can fail on the user's
messages is a `UserError` (exit 2), as SGLang answers such requests with a 400.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sgcli.errors import UserError


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    source: str
    how_chosen: str  # a sentence for the user: why this template


def select_template(raw: Any, name: str | None, *, origin: str) -> ChatTemplate | None:
    """Pick a template from the forms `tokenizer_config.json` allows.

    `raw` may be a string, a list of `{name, template}`, or an object of named
    templates. Choice order: `name` if given, else `default`, else the first.
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


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def raw_prompt(messages: list[dict]) -> str:
    """The prompt used when a tokenizer has no template: the contents, one per line."""
    return "\n".join(_text_of(m.get("content")) for m in messages)


def check_messages(messages: Any, *, where: str = "messages") -> list[dict]:
    """A list of {role, content} objects, or a UserError saying which item is wrong."""
    if not isinstance(messages, list) or not messages:
        raise UserError(
            f"{where} must be a non-empty list of messages", hint='e.g. [{"role": "user", "content": "Hello"}]'
        )
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise UserError(f"{where}[{i}] must be an object with 'role' and 'content', not {type(m).__name__}")
        if not isinstance(m.get("role"), str):
            raise UserError(f"{where}[{i}] has no 'role' string", hint="roles are system, user, assistant, tool")
    return messages


@lru_cache(maxsize=32)
def _compile(source: str):
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(Extension):
        """`{% generation %}...{% endgeneration %}` (transformers' assistant-mask marker) renders its body."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, "jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def render(
    template: ChatTemplate,
    messages: list[dict],
    *,
    add_generation_prompt: bool = True,
    special_tokens: dict[str, str] | None = None,
    tools: list | None = None,
) -> str:
    """Render messages; template and message-structure errors are the user's (exit 2)."""
    import jinja2

    try:
        compiled = _compile(template.source)
        return compiled.render(
            messages=messages, add_generation_prompt=add_generation_prompt, tools=tools, **(special_tokens or {})
        )
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise UserError(
            f"chat template '{template.name}' has a syntax error at line {exc.lineno}: {exc.message}",
            hint="fix the template in tokenizer_config.json / chat_template.jinja",
        ) from None
    except jinja2.exceptions.TemplateError as exc:
        raise UserError(
            f"chat template '{template.name}' rejected the messages: {exc}",
            hint="check the roles, order and contents of the messages",
        ) from None
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
        raise UserError(
            f"chat template '{template.name}' failed on these messages: {type(exc).__name__}: {exc}",
            hint="each message needs 'role' and 'content'",
        ) from None
