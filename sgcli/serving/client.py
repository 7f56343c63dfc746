"""HTTP to a serving engine: one pooled httpx client, retries with backoff, timeouts, SSE streams.

Retried: 429, 5xx, connection errors (refused, reset) and timeouts, up to `retries` times
with exponential backoff (a 429's Retry-After wins when it says longer). Not retried: other
4xx answers, which are the server rejecting the request; they raise `Rejected` with the
server's own reason. What stays failing after the retries raises `ServerFailed` where the server
answered (429/5xx: it is up, but overloaded or broken), `Unreachable` where it did not. A success
status is not trusted either: an answer that is not JSON (or not an event stream), or whose
JSON has the wrong shape, raises `BadReply` (a proxy's login page, another service on the port).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx

from sgcli.constraints.spec import TooDeep, loads_within_depth
from sgcli.errors import SgcliError, plural
from sgcli.serving.base import BadReply, reply_object


class Rejected(SgcliError):
    """The server answered 4xx: it will not run this request as sent."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"server rejected the request (HTTP {status}): {reason}")
        self.status = status
        self.reason = reason


class Unreachable(SgcliError):
    """No answer at all after every retry (connection failures, resets, timeouts); `timed_out`: the last
    attempt ran past --request-timeout (a server that is there, maybe slow on this one prompt)."""

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class ServerFailed(SgcliError):
    """The server answered, with an error: 429/5xx to the last of its attempts (`retried`), or an error
    event in a stream. Not `Unreachable`: the server is there, and "is it up?" would mislead."""

    def __init__(self, message: str, status: int | None, *, retried: bool):
        super().__init__(message)
        self.status = status
        self.retried = retried


@dataclass(frozen=True)
class ClientOptions:
    base_url: str
    api_key: str | None = None
    concurrency: int = 4
    retries: int = 3
    request_timeout: float = 120.0
    backoff_s: float = 0.5  # first wait; doubles each retry
    max_backoff_s: float = 8.0


def make_client(opts: ClientOptions) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {opts.api_key}"} if opts.api_key else {}
    limits = httpx.Limits(max_connections=opts.concurrency, max_keepalive_connections=opts.concurrency)
    return httpx.AsyncClient(
        base_url=opts.base_url.rstrip("/"),
        headers=headers,
        limits=limits,
        timeout=httpx.Timeout(opts.request_timeout, connect=min(10.0, opts.request_timeout)),
    )


# An answer of --max-tokens tokens is kilobytes: past this many bytes a server is misbehaving (one that sent a
# 2 GB line, or ignored max_tokens, grew sgcli past 2 GB before)
MAX_REPLY_BYTES = 32 << 20


def _too_big(what: str) -> BadReply:
    return BadReply(f"{what} ran past {MAX_REPLY_BYTES:,} bytes, more than any answer of --max-tokens tokens")


async def bounded_request(client: httpx.AsyncClient, method: str, path: str, **kwargs) -> httpx.Response:
    """The answer, read whole but never past MAX_REPLY_BYTES (BadReply then), as a Response whose
    `content` is that body (already decoded: the transfer and content encodings are taken off)."""
    async with client.stream(method, path, **kwargs) as response:
        return await _read_whole(response, f"the answer to {method} {path}")


async def _read_whole(response: httpx.Response, what: str) -> httpx.Response:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            raise _too_big(what)
    dropped = ("content-encoding", "content-length", "transfer-encoding")
    headers = [(k, v) for k, v in response.headers.items() if k.lower() not in dropped]
    return httpx.Response(response.status_code, headers=headers, content=bytes(data), request=response.request)


async def _bounded_lines(response: httpx.Response, what: str) -> AsyncIterator[str]:
    """The lines of a streamed answer (ended by `\\n` or `\\r\\n`), never reading past MAX_REPLY_BYTES in
    all: a line that never ends is a BadReply, not a buffer that grows until memory runs out."""
    pending, total = bytearray(), 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > MAX_REPLY_BYTES:
            raise _too_big(what)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending += chunk[start:end]
            yield bytes(pending).rstrip(b"\r").decode("utf-8", "replace")
            pending.clear()
            start = end + 1
        pending += chunk[start:]
    if pending:
        yield bytes(pending).rstrip(b"\r").decode("utf-8", "replace")


def server_reason(response: httpx.Response) -> str:
    """The message a server put in its error body (OpenAI shape, FastAPI shape, or plain text); an HTML
    page (a proxy's error page) is its status's reason phrase, not 500 characters of markup."""
    try:
        body = loads_within_depth(response.content)
    except ValueError:  # TooDeep too
        if _content_type(response) == "text/html":
            return response.reason_phrase or "an HTML page"
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return error if isinstance(error, str) else json.dumps(error)[:500]
    return json.dumps(body)[:500]


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _wait_s(opts: ClientOptions, attempt: int, response: httpx.Response | None) -> float:
    """The backoff before attempt `attempt + 1`. A 429's Retry-After lengthens it, but never past four
    times the longest backoff nor past --request-timeout: a server asking for an hour does not hold
    the run for an hour (the user's time limit is the request's)."""
    wait = min(opts.max_backoff_s, opts.backoff_s * 2**attempt)
    if response is not None and response.status_code == 429:
        try:
            asked = float(response.headers.get("retry-after", 0))
        except ValueError:  # an HTTP date, or nonsense: the backoff alone
            asked = 0.0
        if not math.isfinite(asked):  # nan would win every comparison's tie-break in min()
            asked = 0.0
        wait = max(wait, min(opts.max_backoff_s * 4, opts.request_timeout, asked))
    return wait


_NETWORK_ERRORS = (httpx.TransportError,)  # connect/read/write errors, resets, timeouts, protocol errors


def undecodable(exc: httpx.DecodingError) -> BadReply:
    """A body its Content-Encoding does not describe (gzip that is not gzip): no answer to read."""
    return BadReply(f"the server's answer cannot be decoded as its Content-Encoding says: {exc}")


async def with_retries(opts: ClientOptions, attempt_fn: Callable, on_retry: Callable[[str], None] | None = None):
    """Run `attempt_fn()` (an async call that raises `_Retry` or a network error to ask again)."""
    last, timed_out = "", False
    for attempt in range(opts.retries + 1):
        response = None
        try:
            return await attempt_fn()
        except _Retry as exc:
            response, last = exc.response, f"HTTP {exc.response.status_code}: {server_reason(exc.response)}"
        except _NETWORK_ERRORS as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            timed_out = isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout)
            if isinstance(exc, httpx.TimeoutException) and "--request-timeout" not in last:
                last += f" (within --request-timeout {opts.request_timeout:g} s)"  # a connect under load, too
        if attempt < opts.retries:
            if on_retry:
                on_retry(last)
            await asyncio.sleep(_wait_s(opts, attempt, response))
    tries = plural(opts.retries + 1, "attempt")
    if response is not None:  # the last attempt was answered: the server is up, and failing
        raise ServerFailed(f"{last} (after {tries})", response.status_code, retried=True)
    raise Unreachable(f"no answer after {tries}; last: {last}", timed_out=timed_out)


class _Retry(Exception):
    def __init__(self, response: httpx.Response):
        self.response = response


def _check(response: httpx.Response) -> None:
    if _retryable(response.status_code):
        raise _Retry(response)
    if response.status_code >= 400:
        raise Rejected(response.status_code, server_reason(response))
    if 300 <= response.status_code < 400:  # not followed: a POST redirected elsewhere is not the API asked
        where = response.headers.get("location", "")
        raise BadReply(
            f"the server answered HTTP {response.status_code}, a redirect"
            + (f" to {where[:200]}" if where else "")
            + ", which sgcli does not follow: give the address it names as --base-url"
        )


def _content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def json_body(response: httpx.Response, what: str):
    """The JSON of a success answer; BadReply when it is declared as something else or does not parse."""
    kind = _content_type(response)
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise BadReply(f"{what} came back as {kind}, not JSON: {response.text[:120]!r}")
    try:
        return loads_within_depth(response.content)
    except TooDeep as exc:  # json recurses per level: 200,000 of them were a RecursionError, exit 3
        raise BadReply(f"{what} is {exc}") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise BadReply(f"{what} is not JSON: {response.text[:120]!r}") from None


def deadline_passed(seconds: float) -> httpx.ReadTimeout:
    """The error for an answer not complete within --request-timeout (a network error: retried)."""
    return httpx.ReadTimeout(f"no complete answer within --request-timeout {seconds:g} s")


async def post_json(client: httpx.AsyncClient, opts: ClientOptions, path: str, body: dict) -> tuple[dict, float]:
    """POST and return (the JSON object answered, seconds the successful attempt took). The whole
    answer must arrive within --request-timeout: httpx's own timeout bounds each read, so a server
    dripping a byte at a time would keep an attempt going forever."""

    async def attempt():
        t = time.perf_counter()
        try:
            response = await asyncio.wait_for(bounded_request(client, "POST", path, json=body), opts.request_timeout)
        except asyncio.TimeoutError:
            raise deadline_passed(opts.request_timeout) from None
        except httpx.DecodingError as exc:
            raise undecodable(exc) from None
        _check(response)
        return reply_object(json_body(response, f"the answer to POST {path}")), time.perf_counter() - t

    return await with_retries(opts, attempt)


async def stream_json(client: httpx.AsyncClient, path: str, body: dict) -> AsyncIterator[dict]:
    """POST and yield each server-sent event's JSON. No retries: text already shown can't be unsaid;
    the caller retries only when nothing came back yet."""
    try:
        async with client.stream("POST", path, json=body) as response:
            if response.status_code >= 300:
                _check(await _read_whole(response, f"the answer to POST {path}"))
            kind = _content_type(response)
            if kind and kind != "text/event-stream":
                raise BadReply(f"the streamed answer to POST {path} came back as {kind}, not an event stream")
            async for data in _events(_bounded_lines(response, f"the streamed answer to POST {path}")):
                if data.strip() == "[DONE]":
                    return
                try:
                    event = loads_within_depth(data)
                except TooDeep as exc:
                    raise BadReply(f"the server sent a stream event that is {exc}") from None
                except ValueError:
                    raise BadReply(f"the server sent a stream event that is not JSON: {data[:200]!r}") from None
                _raise_stream_error(event)
                yield event
    except httpx.DecodingError as exc:
        raise undecodable(exc) from None


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event. The SSE standard joins an event's `data:` lines with newlines
    and ends the event at a blank line, so one JSON object may come split over several lines; some
    servers leave the blank lines out. So the data is given on as soon as it is one whole JSON value
    (or `[DONE]`), else at the blank line (or the stream's end), where a non-JSON one is reported."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
            text = "\n".join(data)
            if _whole(text):
                yield text
                data = []
        elif not line and data:
            yield "\n".join(data)
            data = []
    if data:
        yield "\n".join(data)


def _whole(text: str) -> bool:
    if text.strip() == "[DONE]":
        return True
    try:
        loads_within_depth(text)
    except TooDeep:  # given on, for the reader to name
        return True
    except ValueError:
        return False
    return True


def _raise_stream_error(event) -> None:
    """vLLM answers a streamed request it rejects with HTTP 200 and one `data: {"error": ...}` event."""
    if not isinstance(event, dict) or "error" not in event or event.get("choices"):
        return
    error = event["error"]
    message = error.get("message", json.dumps(error)) if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and 400 <= code < 500:
        raise Rejected(code, message)
    raise ServerFailed(
        f"an error event in the stream: {message}", code if isinstance(code, int) else None, retried=False
    )


async def served_models(client: httpx.AsyncClient, opts: ClientOptions) -> list[str]:
    """Model ids from GET /v1/models (vLLM, SGLang and OpenAI all list them there)."""

    async def attempt():
        try:
            response = await bounded_request(client, "GET", "/v1/models")
        except httpx.DecodingError as exc:
            raise undecodable(exc) from None
        _check(response)
        listing = json_body(response, "the answer to GET /v1/models")
        data = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(data, list):
            raise BadReply(f"GET /v1/models answered without a `data` list of models: {json.dumps(listing)[:120]}")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]

    return await with_retries(opts, attempt)
