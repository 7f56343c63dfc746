"""Chat templates: choosing one, and rendering it the way Hugging Face tokenizers do.

sgcli renders templates itself (sandboxed Jinja with the helpers transformers exposes)
so that `template render` and `generate` produce byte-identical prompts, and so that
rendering needs no model framework.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
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
            raise UserError(f"{origin} has no chat template, so none named '{name}'")
        return None
    if isinstance(raw, str):
        if name and name != "default":
            raise UserError(f"{origin} has a single chat template; there is none named '{name}'",
                            hint="drop --template-name")
        return ChatTemplate("default", raw, "the tokenizer's only chat template")
    if isinstance(raw, list):
        named = {}
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or "name" not in item or "template" not in item:
                raise UserError(f"{origin}: chat_template[{i}] must be an object with 'name' and 'template'")
            named[item["name"]] = item["template"]
    elif isinstance(raw, dict):
        named = dict(raw)
    else:
        raise UserError(f"{origin}: chat_template must be a string, a list or an object, not {type(raw).__name__}")
    if not named:
        return None
    if name:
        if name not in named:
            raise UserError(f"{origin} has no chat template named '{name}'",
                            hint="available: " + ", ".join(named))
        return ChatTemplate(name, named[name], f"named by --template-name ({name})")
    if "default" in named:
        return ChatTemplate("default", named["default"], "the template named 'default'")
    first = next(iter(named))
    return ChatTemplate(first, named[first], f"the first template ('{first}'; none is named 'default')")


def render(template: ChatTemplate, messages: list[dict], *, add_generation_prompt: bool = True,
           special_tokens: dict[str, str] | None = None, tools: list | None = None) -> str:
    """Render messages; template and message-structure errors are the user's (exit 2)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        compiled = env.from_string(template.source)
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               tools=tools, **(special_tokens or {}))
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise UserError(f"chat template '{template.name}' has a syntax error at line {exc.lineno}: {exc.message}") from None
    except jinja2.exceptions.TemplateError as exc:
        raise UserError(f"chat template '{template.name}' rejected the messages: {exc}",
                        hint="check the roles and order of the messages") from None
    except (TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"chat template '{template.name}' failed on these messages: {exc}",
                        hint="each message needs 'role' and 'content'") from None
