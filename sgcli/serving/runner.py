"""Running requests against a serving engine and turning the answers into sgcli's records.

Records carry the same keys as a local run's (plus `engine`), go through the same
post-generation validation, and an error (server gone, retries exhausted, a rejected
request) becomes an error record for that line instead of ending the batch. Batches run
with bounded concurrency and are written in input order as they complete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.batch.records import NOT_RUN, stop_cut_warning
from sgcli.batch.requests import Request, chat_messages
from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec
from sgcli.errors import UserError
from sgcli.serving.base import BadReply, Call, Delta, Dialect, Reply
from sgcli.serving.client import ClientOptions, Rejected, ServerFailed, Unreachable
from sgcli.timing import start_to_first_token_ms
from sgcli.validation.validate import validate


@dataclass
class EngineJob:
    """One constraint and sampling setup, sent to one server for every request."""

    engine: str
    dialect: Dialect
    spec: ConstraintSpec
    sampling: SamplingParams
    client: ClientOptions
    served_model: str | None = None
    system: str | None = None
    raw: bool = False
    unenforced: list[dict] = field(default_factory=list)  # keywords sgcli cannot check (--allow-unenforced)

    def call(self, req: Request, *, stream: bool = False) -> Call:
        raw = self.raw and req.messages is None
        messages = None if raw else chat_messages(req, self.system)
        call = self.dialect.request(
            self.spec,
            messages,
            req.prompt if raw else None,
            self.sampling,
            model=self.served_model or "",
            stream=stream,
        )
        if req.tools is not None:  # an --input line's tools: the server's chat template renders them
            return replace(call, body={**call.body, "tools": req.tools})
        return call


def _base(job: EngineJob, req: Request) -> dict:
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "id": req.id,
        "prompt": req.prompt if req.messages is None else req.messages,
        "output": None,
        "parsed": None,
        "valid": None,  # nothing ran yet: an error record stays null; reply_record sets the verdict
        "validated_by": None,
        "unchecked": NOT_RUN,
        "errors": [],
        "finish_reason": "error",
        "backend": "server",
        "engine": job.engine,
        "fallbacks": [],
        "weakened": [],
        "unenforced": list(job.unenforced),
        "warnings": [],
        "model": job.served_model,
        "sampling": job.sampling.record(job.system),
        "usage": {
            "prompt_tokens": None,
            "completion_tokens": None,
            "forced_tokens": None,
            "forward_passes": None,
            "backtracks": None,
        },
        "timings": {
            "load_ms": None,
            "threads": None,
            "compile_ms": None,
            "first_token_ms": None,
            "start_to_first_token_ms": None,  # a streamed answer's (`_stream`)
            "tokens_per_s": None,
            "mask_ms_p50": None,
            "mask_ms_p99": None,
            "request_ms": None,
            "server_ms": None,
        },
    }


def error_record(job: EngineJob, req: Request, message: str) -> dict:
    record = _base(job, req)
    record["errors"] = [message]
    return record


def bad_line_record(job: EngineJob, bad) -> dict:
    """An unreadable input line: the keys, order and run context (backend, engine, model) of every
    other record of the run, with its errors."""
    record = _base(job, Request(bad.id))
    record["errors"] = bad.record()["errors"]
    return record


def _stopped_at(output: str, stops) -> int | None:
    """Where the earliest --stop string starts in a server's answer (None: none there). A server that
    ignores `stop` (or a proxy that drops it) gave `Paris` past `--stop Par`, reported valid (2026-12-06)."""
    found = [i for i in (output.find(s) for s in stops or () if s) if i >= 0]
    return min(found) if found else None


def reply_record(job: EngineJob, req: Request, reply: Reply, elapsed: float, first_token_s: float | None) -> dict:
    """The server's answer, validated as a local output would be ("length" is never valid)."""
    finish, output, cut = reply.finish_reason, reply.output, _stopped_at(reply.output, job.sampling.stop)
    if cut is not None:  # a server that ignored --stop: its answer read as a local run's would end
        output, finish = output[:cut], "stop"
    if reply.refusal:  # OpenAI's structured-output refusal: no answer to the constraint, in the model's words
        ended = [f"the server's model refused: {reply.refusal}"]
    elif finish == "unknown":  # no finish_reason at all: a stream that broke off, or a server that sends none
        ended = [f"the server sent no finish_reason: its answer may be cut short ({len(reply.output)} characters came)"]
    else:
        ended = [] if finish in ("stop", "length") else [f"the server ended with finish_reason {finish!r}"]
    if ended:  # abort, tool_calls, content_filter...: not a finished output
        finish = "error"
    # The server's grammar engine never vouches for its own output: the same independent checkers as
    # a local run (jsonschema, lark, regex, tag scanner); where none reads the constraint, valid is null.
    verdict = validate(job.spec, output, finish_reason=finish, grammar_complete=finish == "stop")
    errors = ended + [e for e in verdict.errors if not (ended and e.startswith("generation stopped"))]
    record = _base(job, req)
    tokens = reply.completion_tokens
    if cut is not None:
        record["warnings"].append(f"the server went on past a --stop string: its answer is cut at character {cut}")
    for odd in reply.odd_usage:
        record["warnings"].append(f"{odd}: left null (the answer itself is kept and checked)")
    if reply.ignored_choices:
        indexes = ", ".join(map(str, sorted(set(reply.ignored_choices))))
        record["warnings"].append(
            f"the server sent choices sgcli did not ask for (index {indexes}; it asks for one): only index 0 is read"
        )
    record.update(
        output=output,
        parsed=verdict.parsed,
        valid=False if errors else verdict.valid,
        validated_by=verdict.validated_by,
        unchecked=verdict.unchecked,
        errors=errors,
        finish_reason=finish,
    )
    if cut is not None and record["valid"] is not True:
        hit = next(s for s in job.sampling.stop if s and reply.output.find(s) == cut)
        record["warnings"].append(stop_cut_warning(hit, cut))
    record["usage"].update(prompt_tokens=reply.prompt_tokens, completion_tokens=tokens)
    record["timings"].update(
        first_token_ms=None if first_token_s is None else round(first_token_s * 1000, 4),
        tokens_per_s=round(tokens / elapsed, 2) if tokens and elapsed > 0 else None,
        request_ms=round(elapsed * 1000, 4),
        **reply.server_timings,
    )
    return record


async def _post(job: EngineJob, http, req: Request) -> dict:
    from sgcli.serving.client import post_json

    call = job.call(req)
    body, elapsed = await post_json(http, job.client, call.path, call.body)
    return reply_record(job, req, job.dialect.reply(call, body), elapsed, None)


async def _stream(job: EngineJob, http, req: Request, on_text: Callable[[str], None]) -> dict:
    """Stream one request, showing text as it comes; retried only while nothing has been shown."""
    import httpx

    from sgcli.serving.client import deadline_passed, stream_json, with_retries

    call = job.call(req, stream=True)
    limit = job.client.request_timeout

    async def attempt():
        t = time.perf_counter()
        text, first, last, ignored, odd = "", None, Delta(), set(), {}

        async def consume():
            nonlocal text, first, last
            async for chunk in stream_json(http, call.path, call.body):
                delta = job.dialect.delta(call, chunk)
                ignored.update(delta.ignored_choices)
                odd.update(dict.fromkeys(delta.odd_usage))
                new = delta.text[len(text) :] if delta.cumulative else delta.text
                if new:
                    first = first if first is not None else time.perf_counter() - t
                    on_text(new)
                    text += new
                last = Delta(
                    finish_reason=delta.finish_reason or last.finish_reason,
                    prompt_tokens=delta.prompt_tokens or last.prompt_tokens,
                    completion_tokens=delta.completion_tokens or last.completion_tokens,
                )

        try:  # the whole stream within --request-timeout: a server that never ends it must not hang sgcli
            try:
                await asyncio.wait_for(consume(), limit)
            except asyncio.TimeoutError:
                raise deadline_passed(limit) from None
        except httpx.TransportError as exc:
            if text:  # shown text cannot be taken back, so no retry
                raise Unreachable(f"the stream broke after {len(text)} characters: {exc}") from None
            raise
        finish = last.finish_reason or "unknown"
        reply = Reply(
            text,
            finish,
            last.prompt_tokens,
            last.completion_tokens,
            ignored_choices=tuple(ignored),
            odd_usage=tuple(odd),
        )
        record = reply_record(job, req, reply, time.perf_counter() - t, first)
        record["timings"]["start_to_first_token_ms"] = start_to_first_token_ms(None if first is None else t + first)
        return record

    return await with_retries(job.client, attempt)


async def _resolve_model(job: EngineJob, http) -> None:
    """Use --served-model, else the server's only (or first) model from /v1/models."""
    if job.served_model or job.call(Request(None, "")).route == "generate":
        return
    from sgcli.serving.client import served_models

    try:
        models = await served_models(http, job.client)
    except ServerFailed as exc:
        raise UserError(
            f"{job.engine} at {job.client.base_url} answered GET /v1/models with an error: {exc}",
            hint=_failing_hint(job, exc),
        ) from None
    except (Unreachable, Rejected, BadReply) as exc:
        raise UserError(
            f"cannot list the models of {job.engine} at {job.client.base_url}: {exc}",
            hint="check --base-url and that the server is up, or pass --served-model NAME",
        ) from None
    if not models:
        raise UserError(f"{job.client.base_url} lists no models", hint="pass --served-model NAME")
    job.served_model = models[0]


def _fail_fast(job: EngineJob, exc: Exception) -> UserError:
    if isinstance(exc, BadReply):
        return UserError(
            f"{job.engine} at {job.client.base_url} sent a reply sgcli cannot use: {exc}",
            hint="check that --base-url is the server's own address (an OpenAI-compatible API answering JSON)",
        )
    if isinstance(exc, Rejected) and exc.status in (401, 403):
        return UserError(
            f"{job.engine} at {job.client.base_url} refused the request (HTTP {exc.status}): {exc.reason}",
            hint="the server wants an API key it accepts: name the variable holding it with --api-key-env",
        )
    if isinstance(exc, Rejected):
        return UserError(
            f"{job.engine} at {job.client.base_url} rejected the request: {exc.reason}",
            hint=f"HTTP {exc.status}: a constraint the server cannot compile, an unknown model, a bad parameter...",
        )
    if isinstance(exc, ServerFailed):
        return UserError(_answered_error(job, exc), hint=_failing_hint(job, exc))
    if isinstance(exc, Unreachable) and exc.timed_out:
        return UserError(
            f"{job.engine} at {job.client.base_url} did not answer in time: {exc}",
            hint="raise --request-timeout (a long answer, or a busy server), or check the server's log",
        )
    return UserError(f"cannot reach {job.engine} at {job.client.base_url}: {exc}", hint="is the server up?")


def _answered_error(job: EngineJob, exc: ServerFailed) -> str:
    return f"{job.engine} at {job.client.base_url} answered with an error: {exc}"


def _failing_hint(job: EngineJob, exc: ServerFailed) -> str:
    """The server is up but failing (overloaded, rate-limiting, broken): waiting helps, and so may more tries."""
    why = "the server is rate-limiting" if exc.status == 429 else "the server is up but failing or overloaded"
    more = f", or allow more attempts with --retries (now {job.client.retries})" if exc.retried else ""
    return f"{why}: try again later{more}"


def _run_loop(coroutine):
    """`asyncio.run`, and on Ctrl-C or SIGTERM (raised as KeyboardInterrupt wherever the loop was) no
    traceback: the task the interrupt ended keeps it, and asyncio logged it at exit as "Task exception
    was never retrieved" (1 run in 3 on a busy stream). The run ends "interrupted", exit 130, as before."""
    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt:
        import logging

        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
        raise


def run_single(job: EngineJob, req: Request, on_text: Callable[[str], None] | None) -> dict:
    """One prompt: streamed when `on_text` is given. A rejection or a dead server is exit 2."""
    from sgcli.serving.client import make_client

    async def main():
        async with make_client(job.client) as http:
            await _resolve_model(job, http)
            try:
                return await (_stream(job, http, req, on_text) if on_text else _post(job, http, req))
            except (Rejected, ServerFailed, Unreachable, BadReply) as exc:
                raise _fail_fast(job, exc) from None

    return _run_loop(main())


def _failed_record(job: EngineJob, item: Request, exc: Exception) -> dict:
    """The error record of one request the server did not answer."""
    if isinstance(exc, Rejected):
        return error_record(job, item, f"server rejected the request (HTTP {exc.status}): {exc.reason}")
    if isinstance(exc, ServerFailed):
        return error_record(job, item, _answered_error(job, exc))
    return error_record(job, item, f"{job.engine} at {job.client.base_url}: {exc}")


def _whole_server(exc: Exception) -> bool:
    """A failure no other prompt could escape: nothing listens there, or the server wants a key."""
    if isinstance(exc, Unreachable):
        return not exc.timed_out
    return isinstance(exc, Rejected) and exc.status in (401, 403)


PROBES = 2  # requests sent alone at the start: a failure on each is the server's, not one prompt's


def run_batch(job: EngineJob, items: list, put: Callable[[int, dict], None]) -> None:
    """Every item (a Request, or a bad line with its own `.record()`), `job.client.concurrency` at a
    time; `put(index, record)` as each finishes. The first requests go alone, so a constraint the
    server rejects (or a server that is not there) fails fast with exit 2 instead of N error records;
    a first request that fails while the next is answered (vLLM's 400 for a prompt past the context,
    a timeout on one long answer) is that line's error record, and the batch goes on."""
    from sgcli.serving.client import make_client

    async def one(index: int, item, http, gate) -> None:
        if not isinstance(item, Request):
            put(index, bad_line_record(job, item))
            return
        async with gate:
            try:
                record = await _post(job, http, item)
            except (Rejected, ServerFailed, Unreachable, BadReply) as exc:
                record = _failed_record(job, item, exc)
        put(index, record)

    async def probe(http) -> tuple[dict[int, dict], int]:
        """The records of the requests sent alone, and the index the rest start after (-1: none sent).
        Nothing is put (written) before the server answered one: a dead server loses no earlier output."""
        records: dict[int, dict] = {}
        failures: list[Exception] = []
        last = -1
        for i in (i for i, item in enumerate(items) if isinstance(item, Request)):
            last = i
            try:
                records[i] = await _post(job, http, items[i])
                return records, last
            except (Rejected, ServerFailed, Unreachable, BadReply) as exc:
                failures.append(exc)
                if _whole_server(exc) or len(failures) == PROBES:
                    break
                records[i] = _failed_record(job, items[i], exc)
        if failures:
            raise _fail_fast(job, failures[0]) from None
        return records, last

    async def main():
        async with make_client(job.client) as http:
            await _resolve_model(job, http)
            probed, first = await probe(http)
            for i in range(first + 1 if first >= 0 else len(items)):
                put(i, probed[i] if i in probed else bad_line_record(job, items[i]))
            if first < 0:
                return
            gate = asyncio.Semaphore(job.client.concurrency)
            tasks = [asyncio.ensure_future(one(i, items[i], http, gate)) for i in range(first + 1, len(items))]
            try:
                await asyncio.gather(*tasks)
            except BaseException:  # a record that cannot be written (a full disk): the rest stop before the
                for task in tasks:  # client closes, instead of each failing on a closed client, unretrieved
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    _run_loop(main())
