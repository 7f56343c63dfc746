"""Rendering chat templates in forked children (`render_later`, `render_many_later`).

A template is untrusted input: in a child, the kernel can end C-level work (`7**(7**10)`) that the
in-process time limit cannot reach, and the template cannot touch the parent's memory. The child
also imports transformers' renderer on the other core while the caller loads the model.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from sgcli.errors import UserError
from sgcli.limits import LimitHit, start_bounded
from sgcli.tokenizers import templates
from sgcli.tokenizers.templates import ChatTemplate, Pending

# The child's own deadline: the render's limit plus importing transformers on a busy machine.
CHILD_TIME_S = templates.RENDER_TIME_S + 60.0


def render_later(
    template: ChatTemplate, messages: list[dict], *, import_first: bool = False, **options: Any
) -> Pending[str]:
    """`render`, started now in a forked child; `result()` gives the text or raises what `render`
    would. Importing transformers for its renderer takes most of a second, which a
    single prompt would otherwise wait for after the model's libraries: in a child it runs on the
    other core meanwhile. `import_first` (nothing to overlap) imports the renderer here once, so
    that the child need not. A child that ran past its time is the template's time-limit error; one
    that dies for any other reason is not the user's doing: the render is then repeated here, where
    its error (a missing transformers, a bug) surfaces as itself."""
    if import_first:
        templates._renderer()
    parent = os.getpid()

    def in_child() -> dict:
        try:
            return {"text": templates.render(template, messages, killable=os.getpid() != parent, **options)}
        except UserError as exc:
            return {"error": exc.as_json()}

    child = start_bounded(in_child, timeout_s=CHILD_TIME_S, memory_mb=0, helper=True)  # render() bounds its memory

    def wait() -> str:
        try:
            reply = child.result()
        except LimitHit as hit:
            if hit.kind == "time":
                raise _timed_out(template) from None
            return templates.render(template, messages, **options)  # result() has already reaped the child
        if "error" in reply:
            raise UserError.from_json(reply["error"])
        return reply["text"]

    return Pending(wait, child.cancel)


def render_many_later(template: ChatTemplate, chats: list[list[dict]], **options: Any) -> Pending[list | None]:
    """`render` of many chats (a batch's requests), started now in one forked child, which imports
    the renderer on the other core while the caller loads the model (in process, that import
    took 0.4-0.7 s of a batch's start). `result()`: per chat its text, or the UserError its render
    raised (each render within its own limits, in the child as here). The child writes each
    chat's result as it goes: where it is ended for time, the chat it was rendering gets the
    template's time-limit error and a new child renders the rest (the renderer imported here first,
    so that no restart imports it again). None where a child failed otherwise (a crash), and the
    caller renders in process, where any error surfaces as itself."""
    batch = _BatchChild(template, chats, options)

    def wait() -> list | None:
        done: list = []
        while True:
            found, timed_out = batch.collect()
            if timed_out is None:
                return None
            done += found
            if not timed_out:
                return done
            done.append(_timed_out(template))
            rest = chats[len(done) :]
            if not rest:
                return done
            try:
                templates._renderer()  # once, here: every restarted child inherits it
            except UserError:
                return None  # the caller renders in process, where this error surfaces
            batch.start(rest)

    def cancel() -> None:
        batch.cancel()

    return Pending(wait, cancel)


class _BatchChild:
    """One child rendering a run of chats, writing a JSON line per chat to a file it shares."""

    def __init__(self, template: ChatTemplate, chats: list[list[dict]], options: dict) -> None:
        self.template, self.options, self.parent = template, options, os.getpid()
        self.start(chats)

    def start(self, chats: list[list[dict]]) -> None:
        progress = tempfile.TemporaryFile()
        template, options, parent = self.template, self.options, self.parent

        def in_child() -> int:
            for messages in chats:
                try:
                    entry = {"text": templates.render(template, messages, killable=os.getpid() != parent, **options)}
                except UserError as exc:
                    entry = {"error": exc.as_json()}
                progress.write(json.dumps(entry).encode() + b"\n")
                progress.flush()
            return len(chats)

        timeout_s = CHILD_TIME_S + templates.RENDER_TIME_S * len(chats)
        self.progress, self.child = progress, start_bounded(in_child, timeout_s=timeout_s, memory_mb=0, helper=True)

    def collect(self) -> tuple[list, bool | None]:
        """The results the child wrote, and whether it was ended for time (None: it failed otherwise)."""
        timed_out: bool | None = False
        try:
            self.child.result()
        except LimitHit as hit:
            timed_out = True if hit.kind == "time" else None
        with self.progress:
            self.progress.seek(0)
            found = [json.loads(line) for line in self.progress if line.endswith(b"\n")]
        return [UserError.from_json(r["error"]) if "error" in r else r["text"] for r in found], timed_out

    def cancel(self) -> None:
        self.child.cancel()
        self.progress.close()


def _timed_out(template: ChatTemplate) -> UserError:
    return templates._template_error(template, templates._TemplateTimeout())
