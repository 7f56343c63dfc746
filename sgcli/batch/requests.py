"""Batch input: one request per JSONL line. A bad line becomes an error record, never a lost batch."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from sgcli.batch.records import error_record, id_key
from sgcli.constraints.reading import LongLine, read_lines
from sgcli.constraints.spec import DuplicateKeys, NotJsonNumber, strict_json_loads
from sgcli.errors import Location, UserError, did_you_mean
from sgcli.limits import DEFAULT_MAX_PROMPT_BYTES
from sgcli.lone_surrogates import lone_surrogate_in
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.templates import Pending, check_messages, check_tools

PROMPT_LIMIT_FLAG = "--max-prompt-bytes"  # one --input line, or a prompt read from stdin (SGCLI_MAX_PROMPT_BYTES)
INPUT_KEYS = ("id", "prompt", "messages", "tools")  # what an --input line may hold; any other key is its error


@dataclass
class Request:
    id: object
    prompt: str | None = None
    messages: list[dict] | None = None
    location: Location | None = None  # the --input line it came from, for the batch summary
    tools: list[dict] | None = None  # the line's tools, for the chat template (as `template render` takes them)


def chat_messages(req: Request, system: str | None) -> list[dict]:
    """The request as chat messages, with `system` first unless the request has its own."""
    messages = list(req.messages) if req.messages is not None else [{"role": "user", "content": req.prompt or ""}]
    if system is not None and not any(m.get("role") == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system})
    return messages


@dataclass
class PromptOptions:
    system: str | None = None
    raw: bool = False
    template_name: str | None = None
    template_kwargs: dict[str, Any] | None = None  # --chat-template-kwargs: variables for the template


class Prompt(NamedTuple):
    """A request's prompt as the model gets it, and what the user should hear about it."""

    text: str
    ids: list[int]
    notices: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # about this prompt (a template that dropped the user's message): in its record


def start_prompt(tokenizer: Tokenizer, opts: PromptOptions, req: Request, *, in_child: bool = False) -> Pending[Prompt]:
    """The request's prompt, rendered now (`in_child=False`) or in a forked child while the caller
    loads the model (a single prompt; a batch's go to one child together: `start_prompts`)."""
    if opts.raw and req.messages is None:
        text = req.prompt or ""
        return Pending.done(Prompt(text, tokenizer.prompt_ids(text, templated=False)))
    pending = tokenizer.start_render_prompt(
        chat_messages(req, opts.system),
        template_name=opts.template_name,
        template_kwargs=opts.template_kwargs,
        tools=req.tools,
        in_child=in_child,
    )
    return pending.then(lambda r: Prompt(r.text, r.ids, r.notices, r.warnings))


def prompt_key(req: Request, opts: PromptOptions) -> str:
    """What a request's prompt depends on besides the options: its chat messages and tools, as one string."""
    return json.dumps([chat_messages(req, opts.system), req.tools], sort_keys=True, ensure_ascii=False, default=str)


def start_prompts(tokenizer: Tokenizer, opts: PromptOptions, reqs: list[Request]) -> Pending[dict | None]:
    """A batch's prompts rendered in one forked child while the caller loads the model
    (`Tokenizer.start_render_many`): `result()` maps `prompt_key` to the Prompt or the UserError of
    its render; None where the requests are rendered in process instead (raw prompts, no template,
    a failed child). Requests with tools are rendered in process, each with its own."""
    chats = {prompt_key(r, opts): chat_messages(r, opts.system) for r in reqs if not (opts.raw or r.tools is not None)}
    keys = list(chats)
    pending = tokenizer.start_render_many(
        [chats[k] for k in keys], template_name=opts.template_name, template_kwargs=opts.template_kwargs
    )

    def by_key(found: list | None) -> dict | None:
        if found is None:
            return None
        return {
            k: r if isinstance(r, UserError) else Prompt(r.text, r.ids, r.notices, r.warnings)
            for k, r in zip(keys, found)
        }

    return pending.then(by_key)


@dataclass
class BadLine:
    id: object
    location: Location
    message: str

    def record(self, **context) -> dict:
        return error_record(self.id, None, [f"{self.location}: {self.message}"], **context)


def read_input(path: str, max_line_bytes: int = DEFAULT_MAX_PROMPT_BYTES) -> tuple[list[bytes], str]:
    """The lines of an --input file (or stdin), read line by line, each at most `max_line_bytes`
    (--max-prompt-bytes; 0 = no limit): a longer line is answered alone with an error record (the others
    go on), and /dev/zero is exit 2 after that many bytes and 64 MiB more without a newline."""
    return read_lines(path, what="input file", limit=max_line_bytes, flag=PROMPT_LIMIT_FLAG)


def read_requests(data: bytes | str | list[bytes], origin: str, *, raw: bool = False) -> Iterator[Request | BadLine]:
    """Each line decoded on its own: a non-UTF-8 or malformed line is rejected alone, by its line number.
    `data` is the whole text, or its lines (`read_input`); `raw` (--raw): a chat's line is refused,
    as it has no prompt to send as is."""
    if isinstance(data, list):
        lines = data
    else:
        lines = (data.encode("utf-8") if isinstance(data, str) else data).split(b"\n")
    for n, chunk in enumerate(_universal_lines(lines), start=1):
        if isinstance(chunk, LongLine):
            yield BadLine(f"line-{n}", Location(origin, n, 1), chunk.message())
            continue
        if n == 1:
            chunk = chunk.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark (Windows editors) is not JSON
        try:
            line = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield BadLine(f"line-{n}", Location(origin, n, exc.start + 1), "line is not UTF-8 text")
            continue
        if not line.strip():
            continue
        yield _parse_line(line, Location(origin, n, 1), n, raw)


def _universal_lines(lines: list) -> Iterator:
    """Lines as an editor numbers them: a lone carriage return ends a line too (a file saved with classic
    Mac line ends is one `\\n`-line holding every record, which would be one error for the whole file).
    A raw CR cannot stand inside a JSON string, so splitting there never cuts a record's text."""
    for chunk in lines:
        if isinstance(chunk, LongLine) or b"\r" not in chunk:
            yield chunk
            continue
        yield from chunk.removesuffix(b"\r").split(b"\r")


def _json_problem(exc: json.JSONDecodeError) -> str:
    """json's message, whole: its "Invalid control character at" expects the position after it."""
    if exc.msg.startswith("Invalid control character") and exc.pos < len(exc.doc):
        code = ord(exc.doc[exc.pos])
        return f"a raw control character (U+{code:04X}) inside a string, which JSON writes as \\u{code:04x}"
    return exc.msg


def _parse_line(line: str, loc: Location, n: int, raw: bool) -> Request | BadLine:
    twice = DuplicateKeys()
    try:
        obj = strict_json_loads(line, twice)
    except json.JSONDecodeError as exc:
        return BadLine(f"line-{n}", Location(loc.path, n, exc.colno), f"invalid JSON: {_json_problem(exc)}")
    except NotJsonNumber as exc:
        return BadLine(f"line-{n}", Location(loc.path, n, max(1, line.find(exc.literal) + 1)), f"invalid JSON: {exc}")
    except RecursionError:
        return BadLine(f"line-{n}", loc, "JSON nested too deeply")
    if not isinstance(obj, dict):
        return BadLine(f"line-{n}", loc, "each line must be a JSON object with 'prompt' or 'messages'")
    if twice.key is not None:  # {"prompt": "a", "prompt": "b"}: which one was meant is not for sgcli to guess
        quoted = json.dumps(twice.key, ensure_ascii=False)  # as typed, unless the key was written with escapes
        second = line.find(quoted, line.find(quoted) + 1)
        where = Location(loc.path, n, second + 1 if second > 0 else 1)
        return BadLine(f"line-{n}", where, f"key {twice.key!r} appears twice in one object: keep one")
    surrogate = lone_surrogate_in(obj)
    if surrogate is not None:  # JSON's "\ud800" (half a pair) parses, but no tokenizer, server or output file takes it
        return BadLine(f"line-{n}", loc, f"the line holds a lone surrogate ({surrogate!r}), which is not text")
    rid = obj.get("id", f"line-{n}")
    prompt, messages, tools = obj.get("prompt"), obj.get("messages"), obj.get("tools")
    # Other keys are the user's own data (idx, label, the expected answer), left alone; a key one typo
    # from a known one is a mistake only where the line lacks what it would stand for ('promt' in a line
    # with no prompt, 'tool' in one with no tools): an id is optional, so 'idx' or '_id' never is
    if (prompt is None) == (messages is None):
        near = _typo_of(obj, ("prompt", "messages")) if prompt is None else ""
        return BadLine(rid, loc, f"give exactly one of 'prompt' (a string) or 'messages' (a list).{near}")
    near = _typo_of(obj, ("tools",)) if tools is None else ""
    if near:
        return BadLine(rid, loc, f"a key that looks like 'tools' was not read:{near} (other keys are left alone)")
    if prompt is not None and not isinstance(prompt, str):
        return BadLine(rid, loc, "'prompt' must be a string")
    try:  # the reader `template render --messages` uses: the same chats pass, the same fail
        if messages is not None:
            check_messages(messages, where="'messages'")
        if tools is not None:
            check_tools(tools, where="'tools'")
    except UserError as exc:
        return BadLine(rid, loc, exc.message)
    if raw and (messages is not None or tools is not None):
        what = "'messages'" if messages is not None else "'tools'"
        return BadLine(rid, loc, f"--raw sends a 'prompt' as is, without the chat template that {what} needs")
    return Request(rid, prompt, messages, Location(loc.path, n), tools)


def _typo_of(obj: dict, names: tuple[str, ...]) -> str:
    """ " Did you mean 'x'?" for the first key of `obj` that is not a key of a line but near one of `names`."""
    for key in obj:
        near = "" if key in INPUT_KEYS else did_you_mean(key, names)
        if near:
            return f" '{key}'?{near}"
    return ""


def duplicate_ids(items: list[Request | BadLine]) -> list[object]:
    """Ids that more than one input line uses (a results file keyed by id would lose records)."""
    counts = Counter(id_key(item.id) for item in items)
    seen, dups = set(), []
    for item in items:
        key = id_key(item.id)
        if counts[key] > 1 and key not in seen:
            seen.add(key)
            dups.append(item.id)
    return dups
