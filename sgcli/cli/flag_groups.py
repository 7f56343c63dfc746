"""Flag groups: options declared once, added to any command, handed to it as one dataclass.

A command lists `flags: SomeFlags = None` among its parameters and is decorated with
`takes("flags", SomeFlags, DECLARATIONS)`: typer then reads a signature holding the
command's own parameters with the group's options in the place of `flags`, and the command receives the
group's values gathered into one object. Decorators stack (one per group), so a command
can take the model, sampling, prompt, engine and constraint groups without declaring a
single option of them again. Option names stay the parameter names, so config files
(click's `default_map`) and `envvar=` feed them as before.
"""

from __future__ import annotations

import functools
import inspect
from enum import Enum
from typing import Any

Declarations = dict[str, tuple[Any, Any]]  # parameter name -> (Annotated option declaration, default)


def takes(
    group: str,
    cls: type,
    declarations: Declarations,
    *,
    only: tuple[str, ...] | None = None,
    defaults: dict[str, Any] | None = None,
):
    """Add `declarations` (or the `only` ones, with `defaults` overriding theirs) to the decorated
    command's options and pass their values to it as `group=cls(...)`. Enum choices arrive as
    their plain string values."""
    unknown = (set(only or ()) | set(defaults or {})) - set(declarations)
    if unknown:
        raise ValueError(f"{cls.__name__} has no flags {sorted(unknown)}")
    added = {
        name: (declaration, (defaults or {}).get(name, default))
        for name, (declaration, default) in declarations.items()
        if only is None or name in only
    }

    def decorate(command):
        # eval_str, not typing.get_type_hints: on Python 3.10 that wraps an `Annotated[...] = None` in
        # another Optional, hiding typer's Argument/Option (positional arguments became unknown)
        own = list(inspect.signature(command, eval_str=True).parameters.values())
        clash = {p.name for p in own} & set(added)
        if clash:
            raise ValueError(f"{command.__name__} declares {sorted(clash)} itself and takes them from {cls.__name__}")
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=declaration)
            for name, (declaration, default) in added.items()
        ]
        params = _in_place(own, group, extra)

        @functools.wraps(command)
        def with_group(*args, **kwargs):
            values = {name: _plain(kwargs.pop(name, default)) for name, (_, default) in added.items()}
            return command(*args, **{group: cls(**values)}, **kwargs)

        with_group.__signature__ = inspect.Signature(params, return_annotation=None)
        with_group.__annotations__ = {p.name: p.annotation for p in params}
        return with_group

    return decorate


def _in_place(own: list[inspect.Parameter], group: str, extra: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """The command's parameters with the group's options where its `group` parameter stood (so the
    command decides where they come in --help), or at the end; everything after them keyword-only."""
    at = next((i for i, p in enumerate(own) if p.name == group), len(own))
    after = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at + 1 :]]
    return own[:at] + extra + after


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value
