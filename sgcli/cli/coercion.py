"""Option values that need no pydantic: typer's adapters are built only for the values that do.

typer (0.29 and later) checks every parameter's value, defaults included, with a pydantic
TypeAdapter it builds on first use; importing pydantic and building an adapter for each of a
command's 30-odd options was a third of `sgcli lint`'s start-up. Here a missing value goes through
typer's own code (which returns it untouched), and so does a value pydantic would return unchanged
(a str for a `str` option, strs for a `list[str]` one, a number of the option's own type without
bounds); anything else builds typer's adapter, as typer would have, and uses it from then on.

Enum choices (--backend, --output-format, --dtype, ...) are checked here without pydantic too, so
that a typo gets one plain message naming the choices and the closest of them ("'llguidence' is
not one of ... Did you mean 'llguidance'?"), not pydantic's "Value error, ..." wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, get_args, get_origin

from typer import BadParameter
from typer.core import TyperCommand, TyperGroup

from sgcli.errors import did_you_mean

try:  # typer's coercion layer (0.29); without it there is nothing to defer
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
except ImportError:  # pragma: no cover - older typer
    RuntimeParam = None


def _shape_known() -> bool:
    """Whether typer's private coercion layer is the one this module was written against (typer
    0.29); any other shape leaves typer's checks exactly as typer makes them, only slower."""
    import dataclasses
    import inspect

    try:
        fields = [f.name for f in dataclasses.fields(RuntimeParam)]
        params = list(inspect.signature(RuntimeParam._coerce_value).parameters)
    except (TypeError, ValueError, AttributeError):
        return False
    return fields == ["parameter_info", "annotation"] and params == ["self", "value", "param", "ctx"]


if RuntimeParam is not None and not _shape_known():  # pragma: no cover - a future typer
    RuntimeParam = None


def _unchanged(descriptor: TypeDescriptor, value: Any) -> bool:
    """Whether typer's adapter would return `value` as it is (a list of it, for a list option)."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return False
    if get_origin(annotation) is list:
        strs = isinstance(value, (list, tuple)) and all(type(v) is str for v in value)
        return get_args(annotation) == (str,) and strs
    if annotation is str:
        return type(value) is str
    if annotation in (int, float):
        return type(value) is annotation and info.min is None and info.max is None and not info.clamp
    return False


def _parser_alone(descriptor: TypeDescriptor, many: bool = False) -> bool:
    """Whether an option's value is its `parser=`'s answer as it is: a scalar option with a parser
    and nothing else (typer's adapter is then `Any` after the parser), or with `many`, a `list[str]`
    one whose each value is the parser's answer."""
    shape = get_origin(descriptor.annotation)
    return (
        descriptor.parameter_info.parser is not None
        and descriptor.file_annotation is None
        and (shape is list and get_args(descriptor.annotation) == (str,) if many else shape not in (list, tuple))
    )


def _enum_of(descriptor: TypeDescriptor) -> type[Enum] | None:
    """The Enum an option's value (or each of a list option's values) must be, if it is one."""
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    if descriptor.parameter_info.parser is None and isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    return None


def plain(value: Any) -> Any:
    """An option's callback: an Enum choice as its plain string, so commands (and JSON) never see the Enum."""
    return value.value if isinstance(value, Enum) else value


def choice(enum: type[Enum], value: Any, param=None, ctx=None, *, folds: bool = False) -> Enum:
    """`value` as a member of `enum` (by its value; in any case where `folds`: an option's case_sensitive=False),
    or a usage error naming the choices and the closest."""
    if isinstance(value, enum):
        return value
    for member in enum:
        if member.value == value or (folds and str(member.value).lower() == str(value).lower()):
            return member
    values = [str(m.value) for m in enum]
    why = getattr(enum, "refused_here", {}).get(value)  # a value other commands take (SGCLI_BACKEND=all)
    raise BadParameter(
        (f"{why}: " if why else "")
        + f"'{value}' is not one of "
        + ", ".join(f"'{v}'" for v in values)
        + "."
        + ("" if why else did_you_mean(str(value), values)),
        ctx=ctx,
        param=param,
    )


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Deferred(RuntimeParam):
        """typer's runtime parameter, built on the first value that needs it."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            enum = _enum_of(self.descriptor)
            if enum is not None:
                folds = not self.descriptor.parameter_info.case_sensitive
                if isinstance(value, (list, tuple)):
                    return [choice(enum, v, param, ctx, folds=folds) for v in value]
                return choice(enum, value, param, ctx, folds=folds)
            if _unchanged(self.descriptor, value):
                return list(value) if isinstance(value, (list, tuple)) else value
            parser = self.descriptor.parameter_info.parser
            many = isinstance(value, (list, tuple))
            if _parser_alone(self.descriptor, many) and (not many or all(type(v) is str for v in value)):
                try:  # typer's adapter would return parser(value) as it is (a usage error passes through)
                    return [parser(v) for v in value] if many else parser(value)
                except BadParameter:
                    raise
                except Exception:  # noqa: BLE001, S110 - typer's adapter words any other error itself, below
                    pass
            param._runtime_param = build_runtime_param(self.descriptor)
            return param._runtime_param._coerce_value(value, param=param, ctx=ctx)


def _defer(params: list) -> list:
    if RuntimeParam is None:
        return params
    for p in params:
        if getattr(p, "_runtime_param", False) is None and hasattr(p, "type_descriptor"):
            d = p.type_descriptor
            p._runtime_param = _Deferred(parameter_info=d.parameter_info, annotation=d.annotation, descriptor=d)
    return params


def check_value(param, value: Any, ctx) -> None:
    """Coerce `value` as the option `param` would (a configuration file's value, before the command
    runs); a value it refuses raises typer's BadParameter with the option's own message."""
    _defer([param])
    runtime = getattr(param, "get_runtime_param", None)
    if runtime is not None:
        runtime().coerce(value, param=param, ctx=ctx)


class Command(TyperCommand):
    """A typer command whose option values are checked as above, and whose help is reflowed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = reflowed(self.help)

    def get_params(self, ctx):
        return _defer(super().get_params(ctx))

    def parse_args(self, ctx, args):
        _refuse_repeated(self.get_params(ctx), args)
        return super().parse_args(ctx, args)


def _refuse_repeated(params, args: list[str]) -> None:
    """An option that takes one value, given twice with two values, is a usage error (exit 2): click
    keeps the last, and `--input a.jsonl --input b.jsonl` answered b's lines only, a's dropped
    without a word (a tour, 2026-12-07). Repeatable options (`--stop`, `--sub`) are lists."""
    single = {
        name: param
        for param in params  # typer's Option, on its own copy of click or on click's (duck-typed)
        if getattr(param, "param_type_name", "") == "option"
        and not (param.multiple or param.is_flag or param.count)
        and param.nargs == 1
        for name in param.opts + param.secondary_opts
    }
    seen: dict[str, tuple[str, str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        param = single.get(name)
        i += 1
        if param is None:
            continue
        if not eq:
            if i >= len(args):
                return  # click says the value is missing
            value, i = args[i], i + 1
        first = seen.setdefault(param.name, (name, value))
        if first[1] != value:
            raise BadParameter(f"given twice ({first[1]!r}, then {value!r}): it takes one value", param_hint=name)


_BREAK_AFTER = (".", ":", "!", "?")
_BREAK_BEFORE = ("- ", "* ", " ", "\t")


def reflowed(text: str | None) -> str | None:
    """A docstring's paragraphs as one line each where the source wrapped them (rich keeps a source
    line break, so a 110-column docstring came out ragged on an 80-column terminal). A break stays after
    a sentence's end and before a list item or an indented line."""
    if not text:
        return text
    lines = text.splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        prev = out[-1]
        joins = prev.strip() and line.strip() and not prev.rstrip().endswith(_BREAK_AFTER)
        if joins and not line.startswith(_BREAK_BEFORE):
            out[-1] = prev.rstrip() + " " + line.strip()
        else:
            out.append(line)
    return "\n".join(out)


class Group(TyperGroup):
    """A typer group (the `sgcli` command itself) whose option values are checked as above, and whose
    help is reflowed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = reflowed(self.help)

    def get_params(self, ctx):
        return _defer(super().get_params(ctx))
