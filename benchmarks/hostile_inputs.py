"""Fault goals: a hostile-input benchmark over the whole CLI (issue 28).

Each case is a category, a name, a setup (files written in a temp dir, a misbehaving HTTP server
on 127.0.0.1, a nearly full tmpfs, a chat template that never ends...), an sgcli command line, the
exit code the README's contract asks for (0 success, 1 findings, 2 bad input named clearly, 130 for
an interrupted run) and optional checks (an output untouched, finished records intact, no id lost
or answered twice, stderr naming the file). Every command runs as its own subprocess
(`python -m sgcli`) with a 60 s limit. Counted per category: exit codes, tracebacks ("Traceback
(most recent call last)" or "internal error" in the output), wrong exit codes, runs over 60 s,
records lost or duplicated, and failed checks.

Generation never loads a model: `--engine openai` / `--engine vllm` against a small stdlib
`http.server` started here on loopback, answering as each case scripts it (200 with non-JSON,
500s, a truncated body, a reset, an answer too slow for --request-timeout, the wrong JSON shape).

Usage:  python benchmarks/hostile_inputs.py [--only CATEGORY[,CATEGORY]] [--name SUBSTRING] [--limit N]
                                            [--json] [--verbose]
Exit status 1 when any case crashed (exit 3 or a traceback), ran past 60 s, exited with another
code than expected, lost or duplicated a record or failed a check.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPITAL = ROOT / "examples" / "capital.json"
LIMIT_S = 60.0
ANSWER = '{"country":"France","capital":"Paris"}'
TRACEBACK = "Traceback (most recent call last)"

# --------------------------------------------------------------------------------------------
# A misbehaving OpenAI-shaped server on loopback
# --------------------------------------------------------------------------------------------


class Server:
    """ThreadingHTTPServer on 127.0.0.1 with one behaviour for every POST (`mode`), and GET
    /v1/models answered per `models` ("ok", "404", "html", "shape"). `delay` seconds before every
    good answer (signals and concurrent runs need a batch that takes a while)."""

    def __init__(
        self, mode: str = "ok", *, models: str = "ok", delay: float = 0.0, answer: str = ANSWER, every: int = 1
    ):
        self.mode, self.models, self.delay, self.answer, self.every = mode, models, delay, answer, every
        self.posts = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                kind = server.models
                if kind == "404":
                    self._raw(404, "text/plain", b"not found")
                elif kind == "html":
                    self._raw(200, "text/html", b"<html><body>login</body></html>")
                elif kind == "shape":
                    self._raw(200, "application/json", b'{"models": ["m"]}')
                else:
                    self._raw(200, "application/json", json.dumps({"data": [{"id": "stub"}]}).encode())

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                with server._lock:
                    server.posts += 1
                    n = server.posts
                mode = server.mode if n % server.every == 0 else "ok"  # every: only each Nth POST misbehaves
                try:
                    self._answer(mode, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _answer(self, mode, body):
                if mode == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if mode == "slow":  # past any --request-timeout the case gives
                    time.sleep(20)
                if mode == "500":
                    return self._raw(500, "application/json", b'{"error": {"message": "boom"}}')
                if mode == "400":
                    return self._raw(400, "application/json", b'{"error": {"message": "bad schema"}}')
                if mode == "nonjson":
                    return self._raw(200, "application/json", b"<html>this is not json</html>")
                if mode == "html":
                    return self._raw(200, "text/html", b"<html>proxy login</html>")
                if mode == "truncated":
                    return self._raw(200, "application/json", b'{"choices": [{"index": 0, "message": {"con')
                if mode == "short-body":  # promises more bytes than it sends, then closes
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "5000")
                    self.end_headers()
                    self.wfile.write(b'{"choices": [')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if mode == "shape":
                    return self._raw(200, "application/json", b'{"result": "Paris"}')
                if mode == "array":
                    return self._raw(200, "application/json", b"[1, 2, 3]")
                if mode == "empty-choices":
                    return self._raw(200, "application/json", b'{"choices": []}')
                if mode == "null-content":
                    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
                    return self._raw(200, "application/json", json.dumps(reply).encode())
                if mode == "non-utf8":
                    return self._raw(200, "application/json", b'{"choices": "\xff\xfe\xfa"}')
                if mode == "endless-stream":
                    return self._endless()
                if mode == "surrogate" and body.get("stream"):  # JSON's escape of half a surrogate pair
                    event = b'data: {"choices": [{"index": 0, "delta": {"content": "\\ud800"}}]}\n\n'
                    return self._raw(200, "text/event-stream", event)
                if mode == "surrogate":
                    reply = '{"choices": [{"index": 0, "message": {"content": "\\ud800"}, "text": "\\ud800"}]}'
                    return self._raw(200, "application/json", reply.encode())
                if mode == "gzip-lie":  # Content-Encoding: gzip on a body that is not gzip
                    return self._raw(200, "application/json", b'{"choices": []}', {"content-encoding": "gzip"})
                if mode == "redirect":
                    return self._raw(307, "text/plain", b"", {"location": "/v2/elsewhere"})
                if mode == "401":
                    return self._raw(401, "application/json", b'{"error": {"message": "invalid api key"}}')
                if mode == "sse-multiline":  # the standard's event: one JSON object over several data: lines
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    delta = {"choices": [{"index": 0, "delta": {"content": server.answer}, "finish_reason": "stop"}]}
                    lines = json.dumps(delta, indent=1).splitlines()
                    self.wfile.write("".join(f"data: {line}\n" for line in lines).encode() + b"\ndata: [DONE]\n\n")
                    self.close_connection = True
                    return
                if mode == "drip":  # a whole reply, one byte every 0.2 s: each read is quick, the answer never
                    reply = json.dumps({"choices": [{"index": 0, "message": {"content": ANSWER}}]}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply)))
                    self.end_headers()
                    for i in range(len(reply)):
                        self.wfile.write(reply[i : i + 1])
                        self.wfile.flush()
                        time.sleep(0.2)
                    return
                if mode == "bad-event":
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(b"data: {not json\n\n")
                    self.close_connection = True
                    return
                if mode == "endless-line":  # one event that never ends: 40 MB without a newline
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    with contextlib.suppress(OSError):  # sgcli stops reading at its limit
                        self.wfile.write(b"data: ")
                        for _ in range(40):
                            self.wfile.write(b"x" * (1 << 20))
                    self.close_connection = True
                    return
                if mode == "deep-output":  # an array nested past every checker's depth, for an object schema
                    reply = {"choices": [{"index": 0, "message": {"content": "[" * 50000 + "]" * 50000}}]}
                    return self._raw(200, "application/json", json.dumps(reply).encode())
                if mode == "stream-cut":  # a few events, then the connection closes: no finish, no [DONE]
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    chunk = {"choices": [{"index": 0, "delta": {"content": '{"coun'}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.close_connection = True
                    return
                time.sleep(server.delay)
                text = server.answer if mode == "ok" else "not json at all"  # "invalid": valid false
                if body.get("stream"):
                    return self._stream(text)
                chat = "messages" in body
                choice = {"index": 0, "finish_reason": "stop"}
                choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
                reply = {"object": "chat.completion", "choices": [choice], "usage": {"prompt_tokens": 3}}
                self._raw(200, "application/json", json.dumps(reply).encode())

            def _raw(self, status, content_type, data, headers=None):
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, text):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for i in range(0, len(text), 4):
                    last = i + 4 >= len(text)
                    delta = {"choices": [{"index": 0, "delta": {"content": text[i : i + 4]}, "finish_reason": None}]}
                    if last:
                        delta["choices"][0]["finish_reason"] = "stop"
                    self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

            def _endless(self):  # one token every 20 ms, never finished: --max-tokens is the client's too
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                t = time.monotonic()
                while time.monotonic() - t < 90:
                    chunk = {"choices": [{"index": 0, "delta": {"content": " "}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.02)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One finished subprocess."""

    args: list[str]
    expect: tuple[int, ...]
    code: int | None
    seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass
class Ctx:
    """What a case's setup, command and checks share: its temp dir, its server, notes."""

    dir: Path
    server: Server | None = None
    env: dict = field(default_factory=dict)
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # failed checks
    lost: int = 0
    duplicated: int = 0

    @property
    def url(self) -> str:
        return self.server.url if self.server else "http://127.0.0.1:9"

    def path(self, name: str) -> Path:
        return self.dir / name

    def write(self, name: str, data: str | bytes) -> Path:
        p = self.dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return p

    def sub(self, args) -> list[str]:
        return [str(a).replace("{d}", str(self.dir)).replace("{url}", self.url) for a in args]


@dataclass
class Case:
    category: str
    name: str
    args: list = field(default_factory=list)  # "{d}" is the temp dir, "{url}" the server's address
    expect: int | tuple[int, ...] = 2
    files: dict = field(default_factory=dict)  # name -> str | bytes | callable(ctx) -> str | bytes
    server: dict | None = None  # Server(**server) for the case's run
    stdin: bytes | None = None
    env: dict = field(default_factory=dict)
    check: Callable[[Ctx, Run], None] | None = None  # appends to ctx.problems
    records: tuple[str, list] | None = None  # (output file, every id the input holds, once each)
    setup: Callable[[Ctx], None] | None = None
    run: Callable[[Ctx], list[Run]] | None = None  # several steps (signals, concurrent runs)


def sgcli(ctx: Ctx, args, expect, *, stdin: bytes | None = None, timeout: float = LIMIT_S) -> Run:
    """`python -m sgcli ARGS` in the case's folder, stopped at `timeout` (then `timed_out`, no exit code)."""
    cmd = [sys.executable, "-m", "sgcli", *ctx.sub(args)]
    env = _env(ctx)
    t = time.monotonic()
    try:
        p = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            cwd=ctx.dir,
            env=env,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        return Run(cmd[3:], _codes(expect), p.returncode, time.monotonic() - t, _text(p.stdout), _text(p.stderr))
    except subprocess.TimeoutExpired as exc:
        return Run(cmd[3:], _codes(expect), None, time.monotonic() - t, _text(exc.stdout), _text(exc.stderr), True)


def start(ctx: Ctx, args) -> subprocess.Popen:
    """A run in the background (signals, concurrent runs); its output goes to files in the temp dir."""
    n = len(list(ctx.dir.glob("bg-*.out")))
    out, err = open(ctx.path(f"bg-{n}.out"), "wb"), open(ctx.path(f"bg-{n}.err"), "wb")
    p = subprocess.Popen(
        [sys.executable, "-m", "sgcli", *ctx.sub(args)],
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        cwd=ctx.dir,
        env=_env(ctx),
    )
    out.close()
    err.close()
    p.sgcli_n = n  # type: ignore[attr-defined]
    p.sgcli_t = time.monotonic()  # type: ignore[attr-defined]
    return p


def finish(ctx: Ctx, p: subprocess.Popen, args, expect, timeout: float = LIMIT_S) -> Run:
    timed_out = False
    try:
        p.wait(timeout=max(0.1, timeout - (time.monotonic() - p.sgcli_t)))  # type: ignore[attr-defined]
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        timed_out = True
    n = p.sgcli_n  # type: ignore[attr-defined]
    read = lambda s: _text(ctx.path(f"bg-{n}.{s}").read_bytes())  # noqa: E731
    code = None if timed_out else p.returncode
    return Run(ctx.sub(args), _codes(expect), code, time.monotonic() - p.sgcli_t, read("out"), read("err"), timed_out)  # type: ignore[attr-defined]


def _env(ctx: Ctx) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGCLI_") or k == "SGCLI_CACHE_DIR"}
    env.update({"NO_COLOR": "1", "COLUMNS": "200", "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(ctx.env)
    return env


def _codes(expect) -> tuple[int, ...]:
    return expect if isinstance(expect, tuple) else (expect,)


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


# --- checks ----------------------------------------------------------------------------------


def says(*needles: str, where: str = "stderr") -> Callable[[Ctx, Run], None]:
    """The run's stderr (or stdout, or "both") names each of `needles` ({d} is the temp dir)."""

    def check(ctx: Ctx, run: Run) -> None:
        text = {"stderr": run.stderr, "stdout": run.stdout}.get(where, run.stdout + "\n" + run.stderr)
        for needle in needles:
            needle = ctx.sub([needle])[0]
            if needle not in " ".join(text.split()):  # rich wraps long lines
                ctx.problems.append(f"{where} does not name {needle!r}: {text.strip()[:300]!r}")

    return check


def untouched(name: str, content: str) -> Callable[[Ctx, Run], None]:
    def check(ctx: Ctx, run: Run) -> None:
        now = ctx.path(name).read_text() if ctx.path(name).exists() else None
        if now != content:
            ctx.problems.append(f"{name} was changed: {str(now)[:200]!r}")

    return check


def never(*needles: str) -> Callable[[Ctx, Run], None]:
    """None of `needles` in the output: an internal error shown as a finding (`TypeError:`) is still one."""

    def check(ctx: Ctx, run: Run) -> None:
        text = _text(run.stdout) + _text(run.stderr)
        for needle in needles:
            if needle in text:
                ctx.problems.append(f"the output says {needle!r}: {text[:200]!r}")

    return check


def both(*checks) -> Callable[[Ctx, Run], None]:
    def check(ctx: Ctx, run: Run) -> None:
        for c in checks:
            c(ctx, run)

    return check


def count_records(ctx: Ctx, name: str, ids: list) -> None:
    """Finished records in `name` against the input's ids: each answered once (an id listed twice
    in `ids` is expected twice). A line that does not parse is a damaged record."""
    path = ctx.path(name)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
    seen: collections.Counter = collections.Counter()
    for i, line in enumerate(lines, 1):
        try:
            seen[json.dumps(json.loads(line)["id"])] += 1
        except (ValueError, KeyError, TypeError):
            ctx.problems.append(f"{name}:{i} is not a finished record: {line[:120]!r}")
    want = collections.Counter(json.dumps(i) for i in ids)
    ctx.lost += sum((want - seen).values())
    ctx.duplicated += sum((seen - want).values())


# --- the catalogue ---------------------------------------------------------------------------

OPENAI = ["--engine", "openai", "--base-url", "{url}", "--served-model", "stub"]
VLLM = ["--engine", "vllm", "--base-url", "{url}", "--served-model", "stub"]
SCHEMA = ["--schema", str(CAPITAL)]
FAST = ["--retries", "0", "--request-timeout", "5", "--max-tokens", "16"]


def gen(*args) -> list:
    return ["generate", *OPENAI, *FAST, *args]


def jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def prompts(n: int, start: int = 0) -> str:
    return jsonl({"id": i, "prompt": f"capital {i}?"} for i in range(start, start + n))


def _deep_schema(depth: int) -> str:
    return "{" + '"items":{' * depth + '"type":"integer"' + "}" * depth + "}"


def _left_recursive_gbnf(n: int) -> str:
    rules = ["root ::= r0"] + [f'r{i} ::= r{i + 1} | r{i} "x"' for i in range(n - 1)] + [f'r{n - 1} ::= "a"']
    return "\n".join(rules) + "\n"


def _deep_gbnf(depth: int) -> str:
    return "root ::= " + "(" * depth + '"a"' + ")" * depth + "\n"


def _wide_schema(n: int) -> str:
    return json.dumps({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(n)}})


def _tokenizer_folder(ctx: Ctx, template: str) -> Path:
    """A model folder: the default model's tokenizer.json and a tokenizer_config.json holding `template`."""
    from sgcli.tokenizers import load_tokenizer

    folder = ctx.path("model")
    folder.mkdir(exist_ok=True)
    shutil.copy(load_tokenizer(None).vocab.source, folder / "tokenizer.json")
    config = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "chat_template": template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return folder


def _mount_tmpfs(ctx: Ctx, name: str, size: str) -> Path | None:
    """A tmpfs of `size` at ctx/name (root only); None where it cannot be mounted."""
    folder = ctx.path(name)
    folder.mkdir()
    if os.geteuid() != 0:
        return None
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if p.returncode != 0:
        return None
    ctx.cleanups.append(lambda: subprocess.run(["umount", "-l", str(folder)], capture_output=True))
    return folder


def _fill(folder: Path, leave: int) -> None:
    """Fill a filesystem until `leave` bytes are free."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    if free > leave:
        with open(folder / "filler", "wb") as f:
            with contextlib.suppress(OSError):
                f.write(b"\0" * (free - leave))


def flag_cases() -> list[Case]:
    c = "flags"
    bad = [
        ("typo --max-token", gen(*SCHEMA, "--max-token", "5", "x"), ["--max-token"]),
        ("typo --shcema", gen("--shcema", str(CAPITAL), "x"), ["--shcema"]),
        ("unknown subcommand", ["generat", "x"], ["generat"]),
        ("--temperature nan", gen(*SCHEMA, "--temperature", "nan", "x"), ["--temperature"]),
        ("--temperature -inf", gen(*SCHEMA, "--temperature", "-inf", "x"), ["--temperature"]),
        ("--top-p 0", gen(*SCHEMA, "--top-p", "0", "x"), ["--top-p"]),
        ("--top-p 1.5", gen(*SCHEMA, "--top-p", "1.5", "x"), ["--top-p"]),
        ("--top-k -1", gen(*SCHEMA, "--top-k", "-1", "x"), ["--top-k"]),
        ("--seed abc", gen(*SCHEMA, "--seed", "abc", "x"), ["--seed"]),
        ("--max-tokens -5", gen(*SCHEMA, "--max-tokens", "-5", "x"), ["--max-tokens"]),
        ("--max-tokens 1e99", gen(*SCHEMA, "--max-tokens", "1e99", "x"), ["--max-tokens"]),
        ("--concurrency 0", gen(*SCHEMA, "--concurrency", "0", "x"), ["--concurrency"]),
        ("--concurrency -4", gen(*SCHEMA, "--concurrency", "-4", "x"), ["--concurrency"]),
        ("--retries -1", gen(*SCHEMA, "--retries", "-1", "x"), ["--retries"]),
        ("--request-timeout 0", gen(*SCHEMA, "--request-timeout", "0", "x"), ["--request-timeout"]),
        ("--request-timeout nan", gen(*SCHEMA, "--request-timeout", "nan", "x"), ["--request-timeout"]),
        ("--request-timeout -1", gen(*SCHEMA, "--request-timeout", "-1", "x"), ["--request-timeout"]),
        ("--compile-timeout nan", ["compile", str(CAPITAL), "--compile-timeout", "nan"], ["--compile-timeout"]),
        ("--compile-timeout inf", ["compile", str(CAPITAL), "--compile-timeout", "inf"], ["--compile-timeout"]),
        ("SGCLI_COMPILE_TIMEOUT=nan", ["lint", str(CAPITAL)], ["SGCLI_COMPILE_TIMEOUT"]),  # the variable given
        ("--compile-timeout -3", ["compile", str(CAPITAL), "--compile-timeout", "-3"], ["--compile-timeout"]),
        ("--compile-memory -1", ["compile", str(CAPITAL), "--compile-memory", "-1"], ["--compile-memory"]),
        ("--max-constraint-bytes -1", ["lint", str(CAPITAL), "--max-constraint-bytes", "-1"], ["--max-constraint"]),
        ("--max-prompt-bytes -1", gen(*SCHEMA, "--max-prompt-bytes", "-1", "x"), ["--max-prompt-bytes"]),
        ("--batch-size 0", gen(*SCHEMA, "--batch-size", "0", "x"), ["--batch-size"]),
        ("--threads 0", gen(*SCHEMA, "--threads", "0", "x"), ["--threads"]),
        ("--indent -2", gen(*SCHEMA, "--json-whitespace", "flexible", "--indent", "-2", "x"), ["--indent"]),
        ("--backend nope", gen(*SCHEMA, "--backend", "nope", "x"), ["nope"]),
        ("--engine nope", ["generate", "--engine", "nope", *SCHEMA, "x"], ["nope"]),
        ("--output-format xml", gen(*SCHEMA, "--output-format", "xml", "x"), ["xml"]),
        ("--device tpu:0", ["generate", *SCHEMA, "--device", "tpu:0", "x"], ["tpu"]),
        ("--dtype float8", ["generate", *SCHEMA, "--dtype", "float8", "x"], ["float8"]),
        ("--json-whitespace wide", gen(*SCHEMA, "--json-whitespace", "wide", "x"), ["wide"]),
        ("--whitespace-pattern '('", gen(*SCHEMA, "--whitespace-pattern", "(", "x"), ["--whitespace-pattern"]),
        ("--schema and --regex", gen(*SCHEMA, "--regex", "a+", "x"), ["--regex"]),
        (
            "--resume and --force",
            gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--resume", "--force"),
            ["--resume", "--force"],
        ),
        ("--compact and --indent", gen(*SCHEMA, "--json-whitespace", "compact", "--indent", "2", "x"), ["--indent"]),
        ("--indent with a regex", gen("--regex", "[a-z]+", "--indent", "2", "x"), ["--indent", "no JSON"]),
        ("--strict-properties with GBNF", ["compile", "@sql", "--strict-properties"], ["--strict-properties"]),
        ("--engine openai without --base-url", ["generate", "--engine", "openai", *SCHEMA, "x"], ["--base-url"]),
        (
            "--base-url not a url",
            ["generate", "--engine", "openai", "--base-url", "not a url", *SCHEMA, "x"],
            ["--base-url"],
        ),
        (
            "--base-url ftp://",
            ["generate", "--engine", "openai", "--base-url", "ftp://127.0.0.1:9", *SCHEMA, "x"],
            ["ftp"],
        ),
        ("--base-url without --engine", ["generate", "--base-url", "{url}", *SCHEMA, "x"], ["--base-url"]),
        (
            "--api-key-env unset",
            gen(*SCHEMA, "--api-key-env", "SGCLI_HOSTILE_NO_SUCH_VAR", "x"),
            ["SGCLI_HOSTILE_NO_SUCH_VAR"],
        ),
        (
            "--chat-template-kwargs not json",
            gen(*SCHEMA, "--chat-template-kwargs", "{nope", "x"),
            ["--chat-template-kwargs"],
        ),
        (
            "--chat-template-kwargs a list",
            gen(*SCHEMA, "--chat-template-kwargs", "[1]", "x"),
            ["--chat-template-kwargs"],
        ),
        ("--think-budget -1", gen(*SCHEMA, "--reasoning", "--think-budget", "-1", "x"), ["--think-budget"]),
        ("--device-map garbage", ["generate", *SCHEMA, "--device-map", "{garbage", "x"], ["--device-map"]),
        ("--sub without =", ["compile", str(ROOT / "examples" / "reasoning_json.lark"), "--sub", "answer"], ["--sub"]),
        ("--choice empty list", gen("x"), ["constraint"]),
        ("prompt and --input", gen(*SCHEMA, "--input", "{d}/p.jsonl", "x"), ["--input"]),
        ("no prompt at all", gen(*SCHEMA), ["prompt"]),
        ("compile --backend nope", ["compile", str(CAPITAL), "--backend", "nope"], ["nope"]),
        ("masks without a grammar", ["masks", "--text", "{}"], ["grammar"]),
        ("lint --select X999", ["lint", str(CAPITAL), "--select", "X999"], ["X999"]),
        ("schema NOPE", ["schema", "NOPE"], ["NOPE"]),
        ("cache frobnicate", ["cache", "frobnicate"], ["frobnicate"]),
        ("config get nope", ["config", "get", "nope"], ["nope"]),
        ("tokenizer missing dir", ["tokenizer", "inspect", "--tokenizer", "{d}/nope"], ["nope"]),
        ("bench --rounds -1", ["bench", str(CAPITAL), "--rounds", "-1"], ["--rounds"]),
        ("convert --to cobol", ["convert", str(CAPITAL), "--to", "cobol"], ["cobol"]),
        # numbers past any use: each overflowed what it reached (a read, the watchdog's clock, torch's pool)
        ("--threads 100000", gen(*SCHEMA, "--threads", "100000", "x"), ["--threads"]),
        ("--threads 10**20", gen(*SCHEMA, "--threads", str(10**20), "x"), ["--threads"]),
        ("--max-constraint-bytes 10**20", ["compile", str(CAPITAL), "--max-constraint-bytes", str(10**20)], ["--max"]),
        ("--max-prompt-bytes 10**20", gen(*SCHEMA, "--max-prompt-bytes", str(10**20), "x"), ["--max-prompt"]),
        ("--compile-timeout 1e10", ["compile", str(CAPITAL), "--compile-timeout", "1e10"], ["--compile-timeout"]),
        ("--compile-memory 2**62", ["compile", str(CAPITAL), "--compile-memory", str(2**62)], ["--compile-memory"]),
        ("--indent 10**20", ["compile", str(CAPITAL), "-b", "xgrammar", "--indent", str(10**20)], ["--indent"]),
        ("--max-whitespace 10**20", ["compile", str(CAPITAL), "--max-whitespace", str(10**20)], ["--max-whitespace"]),
        # bytes that are not UTF-8 on the command line (surrogateescape): the encoder or tokenizer raised
        ("prompt not UTF-8", gen(*SCHEMA, "caf\udce9"), ["not UTF-8"]),
        ("--system not UTF-8", gen(*SCHEMA, "--system", "caf\udce9", "x"), ["not UTF-8"]),
        ("masks --text not UTF-8", ["masks", *SCHEMA, "--text", "caf\udce9"], ["not UTF-8"]),
        ("--schema - and the prompt -", gen("--schema", "-", "-"), ["only one input can come from stdin"]),
        ("--schema - and --input -", gen("--schema", "-", "--input", "-"), ["only one input can come from stdin"]),
    ]
    files = {"p.jsonl": prompts(2)}
    cases = [Case(c, name, args, 2, files=dict(files), server={}, check=says(*needles)) for name, args, needles in bad]
    for case in cases:
        if case.name.startswith("SGCLI_COMPILE_TIMEOUT"):
            case.env = {"SGCLI_COMPILE_TIMEOUT": "nan"}
    # passed on as is: the server decides (a stub here takes anything)
    cases.append(
        Case(c, "--max-tokens 10**30 to a server", gen(*SCHEMA, "--max-tokens", str(10**30), "x"), 0, server={})
    )
    return cases


def file_cases() -> list[Case]:
    c = "files"
    huge_line = "{" + '"type":"object",' * 200_000 + '"title":"x"}'  # 3.4 MB on one line
    cases = [
        Case(c, "lint DIR holding a FIFO", ["lint", "{d}/fo"], 0, setup=_fifo_folder, check=says("not a regular file")),
        Case(c, "empty prompt from stdin", gen(*SCHEMA, "-"), 2, stdin=b"", server={}, check=says("empty")),
        *(
            Case(c, name, ["lint", str(CAPITAL)], 2, files={file: text}, check=says(at))
            for name, file, text, at in (
                (
                    "pyproject.toml: tool.sgcli not a table",
                    "pyproject.toml",
                    "# [tool.sgcli]\n[tool]\nsgcli = 5\n",
                    "pyproject.toml:3",
                ),
                (
                    "pyproject.toml: tool not a table",
                    "pyproject.toml",
                    'x = "[tool.sgcli]"\ntool = 5\n',
                    "pyproject.toml:2",
                ),
                ("sgcli.toml: lint = 5", "sgcli.toml", "lint = 5\n", "table"),
                ("sgcli.toml: threads out of range", "sgcli.toml", "threads = 100000\n", "sgcli.toml:1"),
            )
        ),
    ]
    for cmd in ("lint", "compile", "generate"):

        def args(target, cmd=cmd):
            return gen("--schema", target, "x") if cmd == "generate" else [cmd, target]

        cases += [
            Case(c, f"{cmd}: missing file", args("{d}/nope.json"), 2, check=says("nope.json")),
            Case(c, f"{cmd}: a directory", args("{d}"), 2, server={}),
            Case(c, f"{cmd}: /dev/zero", args("/dev/zero"), 2, server={}, check=says("/dev/zero")),
            Case(c, f"{cmd}: /dev/urandom", args("/dev/urandom"), 2, server={}, check=says("/dev/urandom")),
            Case(
                c,
                f"{cmd}: binary",
                args("{d}/b.json"),
                2,
                files={"b.json": bytes(range(256)) * 4},
                server={},
                check=says("b.json"),
            ),
            Case(
                c,
                f"{cmd}: non-UTF-8",
                args("{d}/l.json"),
                2,
                files={"l.json": '{"title": "caf\xe9"}'.encode("latin-1")},
                server={},
                check=says("l.json"),
            ),
            Case(
                c,
                f"{cmd}: empty",
                args("{d}/e.json"),
                1 if cmd == "lint" else 2,
                files={"e.json": ""},
                server={},
                check=says("e.json", where="both"),
            ),  # lint: a located finding, like any malformed JSON
            # root reads a chmod-000 file: a read that fails with EIO stands in for an unreadable one
            Case(
                c,
                f"{cmd}: read error (/proc/self/mem)",
                args("/proc/self/mem"),
                2,
                server={},
                check=says("/proc/self/mem"),
            ),
            Case(
                c,
                f"{cmd}: 3 MB on one line",
                args("{d}/h.json"),
                2,
                files={"h.json": huge_line},
                server={},
                check=says("h.json"),
            ),
        ]
    bom = "\ufeff" + CAPITAL.read_text()
    crlf = CAPITAL.read_text().replace("\n", "\r\n")
    cases += [
        Case(
            c,
            "generate: schema with a BOM",
            gen("--schema", "{d}/bom.json", "x"),
            0,
            files={"bom.json": bom},
            server={},
        ),
        Case(
            c,
            "generate: schema with CRLF",
            gen("--schema", "{d}/crlf.json", "x"),
            0,
            files={"crlf.json": crlf},
            server={},
        ),
        Case(c, "lint: schema with a BOM", ["lint", "{d}/bom.json"], 0, files={"bom.json": bom}),
        Case(c, "--input missing", gen(*SCHEMA, "--input", "{d}/nope.jsonl"), 2, server={}, check=says("nope.jsonl")),
        Case(c, "--input a directory", gen(*SCHEMA, "--input", "{d}"), 2, server={}),
        Case(c, "--input /dev/zero", gen(*SCHEMA, "--input", "/dev/zero"), 2, server={}, check=says("--max-prompt")),
        Case(
            c,
            "--input empty",
            gen(*SCHEMA, "--input", "{d}/e.jsonl", "-o", "{d}/o.jsonl"),
            0,
            files={"e.jsonl": ""},
            server={},
        ),
        Case(
            c,
            "--input with a BOM and CRLF",
            gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl"),
            0,
            files={"p.jsonl": "\ufeff" + prompts(3).replace("\n", "\r\n")},
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(
            c,
            "--input binary",
            gen(*SCHEMA, "--input", "{d}/b.jsonl", "-o", "{d}/o.jsonl"),
            1,
            files={"b.jsonl": b"\x00\x01\x02\xff\xfe\n\x89PNG\r\n"},
            server={},
        ),
        Case(c, "test: cases file missing", ["test", "{d}/nope.test.yaml"], 2, check=says("nope.test.yaml")),
        Case(
            c,
            "test: cases file is binary",
            ["test", "{d}/t.test.yaml"],
            2,
            files={"t.test.yaml": b"\xff\x00" * 50},
            check=says("t.test.yaml"),
        ),
        Case(c, "convert: /dev/urandom as .gbnf", ["convert", "/dev/urandom", "--to", "lark"], 2),
        Case(c, "template render: messages file is a directory", ["template", "render", "--messages", "{d}"], 2),
    ]
    return cases


def schema_cases() -> list[Case]:
    c = "schemas"
    bad = {
        "invalid JSON": ('{"type": "object",, }', 2, ["s.json:1"]),
        "trailing garbage": ('{"type": "object"} xyz', 2, ["s.json:1"]),
        "an array": ("[1, 2]", 2, ["s.json"]),
        "a number": ("42", 2, ["s.json"]),
        "wrong draft": (json.dumps({"$schema": "http://example.com/draft-99", "type": "integer"}), 1, []),
        "type not a type": (json.dumps({"type": "integre"}), 2, ["integre"]),
        "false": ("false", 2, ["s.json"]),
        "true": ("true", 0, []),
        "remote $ref": (json.dumps({"$ref": "https://example.com/x.json"}), 2, ["https://example.com/x.json"]),
        "cyclic $ref": (
            json.dumps({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
            2,
            ["s.json"],
        ),
        "dangling $ref": (json.dumps({"properties": {"a": {"$ref": "#/$defs/nope"}}}), 2, ["#/$defs/nope"]),
        "600 levels deep": (_deep_schema(600), 2, ["s.json"]),
        "200 levels deep": (_deep_schema(200), 0, []),
        "2,000 properties": (_wide_schema(2000), 0, []),
        "bad regex pattern": (json.dumps({"type": "string", "pattern": "(a"}), 2, ["pattern"]),
        # Python's re reads lookahead, so sgcli's checker enforces it: the stub's object is invalid output
        "lookahead pattern": (json.dumps({"type": "string", "pattern": "^(?=a)a+$"}), 1, []),
        "unknown format": (json.dumps({"type": "string", "format": "hostile-format"}), 2, ["hostile-format"]),
        "minimum a string": (json.dumps({"type": "integer", "minimum": "5"}), 2, ["minimum"]),
        "enum empty": (json.dumps({"enum": []}), 2, ["enum"]),
        "minLength > maxLength": (json.dumps({"type": "string", "minLength": 5, "maxLength": 2}), 2, ["s.json"]),
        "huge number": ('{"type": "integer", "maximum": 1e999}', 2, ["s.json"]),
        "NaN literal": ('{"type": "number", "maximum": NaN}', 2, ["s.json"]),
        "duplicate keys": ('{"type": "string", "type": "integer"}', 1, []),
        "5,000-digit integer": ('{"type": "integer", "maximum": ' + "9" * 5000 + "}", 2, ["s.json:1"]),
        # a date is 10 characters: nothing fits (the model once loaded, backtracked and failed: exit 1)
        "date under maxLength 5": (json.dumps({"type": "string", "format": "date", "maxLength": 5}), 2, ["s.json:1"]),
        # a near miss of draft-04's URI: read as draft-04, where `exclusiveMaximum: true` is valid (it was refused)
        "draft-04 by https": (
            json.dumps({"$schema": "https://json-schema.org/draft-04/schema#", "maximum": 9, "exclusiveMaximum": True}),
            0,  # was exit 2, "True is not of type 'number'" (read as 2020-12); the stub's answer fits
            [],
        ),
    }
    cases = []
    for name, (text, code, needles) in bad.items():
        cases.append(
            Case(
                c,
                f"generate: {name}",
                gen("--schema", "{d}/s.json", "x"),
                code,
                files={"s.json": text},
                server={},
                check=says(*needles) if needles else None,
            )
        )
    for name in ("invalid JSON", "600 levels deep", "bad regex pattern", "NaN literal"):
        text, _, needles = bad[name]
        cases.append(
            Case(c, f"compile: {name}", ["compile", "{d}/s.json"], 2, files={"s.json": text}, check=says(*needles))
        )
    cases.append(
        Case(
            c,
            "lint: invalid JSON (a finding)",
            ["lint", "{d}/s.json"],
            1,
            files={"s.json": bad["invalid JSON"][0]},
            check=says("s.json:1", where="stdout"),
        )
    )
    # a schema split over files (sgcli/constraints/schema_bundle.py): what a `$ref` names is read, bounded
    split = {
        "$ref to /dev/zero": ({"s.json": json.dumps({"$ref": "/dev/zero"})}, ["s.json:1", "not a file"]),
        "$ref to a folder": ({"s.json": json.dumps({"$ref": "."})}, ["s.json:1", "not a file"]),
        "$ref to a missing file": ({"s.json": json.dumps({"$ref": "gone.json"})}, ["s.json:1", "does not exist"]),
        "$ref to a file that is not JSON": (
            {"s.json": json.dumps({"$ref": "n.json"}), "n.json": "hello"},
            ["n.json:1:1", "s.json:1"],
        ),
        "$ref cycle across files": (
            {
                "s.json": json.dumps({"allOf": [{"$ref": "b.json"}]}),
                "b.json": json.dumps({"anyOf": [{"$ref": "s.json"}]}),
            },
            ["cycle"],
        ),
        "$ref to a file of another draft": (
            {
                "s.json": json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "d.json"}),
                "d.json": json.dumps({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}),
            },
            ["s.json:1", "draft 4"],
        ),
        "$ref to a referenced file's bad keyword": (
            {"s.json": json.dumps({"$ref": "k.json"}), "k.json": '{\n  "minimum": "one"\n}'},
            ["k.json:2", "s.json:1"],
        ),
    }
    for name, (files, needles) in split.items():
        cases.append(Case(c, f"generate: {name}", gen("--schema", "{d}/s.json", "x"), 2, files=files, server={}))
        cases.append(Case(c, f"compile: {name}", ["compile", "{d}/s.json"], 2, files=files, check=says(*needles)))
    # URLs read from a folder the user names (--ref-base URL=DIR, sgcli/constraints/ref_bases.py)
    by_url = {
        "--ref-base without =": ("https://x.org/zero", "https://x.org/", ["expected URL=DIR"]),
        "--ref-base not a URL": ("https://x.org/zero", "x.org={d}", ["not an absolute URI"]),
        "--ref-base onto /dev": (
            "https://x.org/zero",
            "https://x.org/=/dev",
            ["s.json:1", "/dev/zero, which is not a file"],
        ),
        "--ref-base climbed out of": (
            "https://x.org/%2e%2e/etc/passwd",
            "https://x.org/={d}",
            ["s.json:1", "climbs out"],
        ),
        "--ref-base folder missing": ("https://x.org/a", "https://x.org/={d}/gone", ["s.json:1", "does not exist"]),
    }
    for name, (ref, base, needles) in by_url.items():
        files = {"s.json": json.dumps({"$ref": ref})}
        args = ["--schema", "{d}/s.json", "--ref-base", base]
        cases.append(Case(c, f"generate: {name}", gen(*args, "x"), 2, files=files, server={}))
        cases.append(Case(c, f"compile: {name}", ["compile", *args], 2, files=files, check=says(*needles)))
    # formats the user defines (--format NAME=REGEX, sgcli/constraints/formats.py)
    pathy = {"s.json": json.dumps({"type": "string", "format": "path"})}
    by_format = {
        "--format without =": (["--format", "path"], ["expected NAME=REGEX"]),
        "--format bad regex": (["--format", "path=[a-"], ["does not compile at column"]),
        "--format redefines email": (["--format", "email=."], ["already has its standard meaning"]),
        "--format twice": (["--format", "path=a", "--format", "path=b"], ["more than once"]),
        "format no one defines": ([], ["s.json:1", "--format path=REGEX"]),
    }
    for name, (flags, needles) in by_format.items():
        args = ["--schema", "{d}/s.json", *flags]
        cases.append(Case(c, f"generate: {name}", gen(*args, "x"), 2, files=pathy, server={}))
        cases.append(Case(c, f"compile: {name}", ["compile", *args], 2, files=pathy, check=says(*needles)))
    cases.append(Case(c, "inline schema not JSON", gen("--schema", "{not json", "x"), 2, server={}))
    cases.append(Case(c, "schema on stdin, empty", gen("--schema", "-", "x"), 2, stdin=b"", server={}))
    return cases


def grammar_cases() -> list[Case]:
    c = "grammars"
    g = {
        "GBNF syntax error": ("g.gbnf", 'root ::= "a" | | ("b"\n', 2, ["g.gbnf:"]),
        "GBNF undefined rule": ("g.gbnf", "root ::= item+\n", 2, ["item"]),
        "GBNF no root": ("g.gbnf", 'start ::= "a"\n', 2, ["root"]),
        "GBNF empty": ("g.gbnf", "", 2, ["g.gbnf"]),
        "GBNF unterminated string": ("g.gbnf", 'root ::= "abc\n', 2, ["g.gbnf:"]),
        "GBNF bad char class": ("g.gbnf", "root ::= [z-a]\n", 2, ["g.gbnf:1"]),
        "GBNF 150 nested groups": ("g.gbnf", _deep_gbnf(150), 2, ["g.gbnf"]),
        "GBNF 10,000-rule left recursion": ("g.gbnf", _left_recursive_gbnf(10_000), (0, 1), []),
        "Lark syntax error": ("g.lark", 'start: ("a"\n', 2, ["g.lark"]),
        "Lark undefined rule": ("g.lark", "start: item\n", 2, ["item"]),
        "Lark empty": ("g.lark", "", 2, ["g.lark"]),
        "Lark bad regex": ("g.lark", "start: /(a/\n", 2, ["g.lark"]),
        "regex syntax error": ("g.regex", "(ab", 2, ["g.regex"]),
        "regex empty": ("g.regex", "", 2, ["g.regex"]),
        "regex 150 nested groups": ("g.regex", "(" * 150 + "a" + ")" * 150, 2, ["g.regex"]),
        "regex a{1,1000000}": ("g.regex", "a{1,1000000}", 2, []),
        "unknown extension": ("g.txt", 'root ::= "a"\n', 2, ["g.txt"]),
    }
    cases = []
    for name, (fname, text, code, needles) in g.items():
        for cmd in ("lint", "compile"):
            # A malformed grammar is exit 2 by the README's table, and exit 1 by lint's and compile's own
            # (a finding; "some grammar failed to compile"): sgcli's reader refuses some (2), a backend
            # others (1, its error at file:line:col in the table). Either, as long as the file is named.
            expect = (1, 2) if code == 2 else code
            if name == "unknown extension" or (cmd == "lint" and name == "regex a{1,1000000}"):
                expect = {"unknown extension": 2}.get(name, 0)  # lint does not compile on outlines-core
            cases.append(
                Case(
                    c,
                    f"{cmd}: {name}",
                    [cmd, "{d}/" + fname, "--compile-timeout", "10"],
                    expect,
                    files={fname: text},
                    check=says(*needles, where="both") if needles else None,
                )
            )
    cases += [
        Case(
            c,
            "generate --ebnf undefined rule (vllm)",
            ["generate", *VLLM, *FAST, "--ebnf", "{d}/g.gbnf", "x"],
            2,
            files={"g.gbnf": 'root ::= "a" item\n'},
            server={},
            check=says("g.gbnf:1", "item"),
        ),
        Case(
            c,
            "generate --lark undefined rule (vllm)",
            ["generate", *VLLM, *FAST, "--lark", "{d}/g.lark", "x"],
            2,
            files={"g.lark": 'start: "a" item\n'},
            server={},
            check=says("g.lark:1", "item"),
        ),
        Case(
            c,
            "generate --ebnf 150 nested groups (vllm)",
            ["generate", *VLLM, *FAST, "--ebnf", "{d}/g.gbnf", "x"],
            2,
            files={"g.gbnf": _deep_gbnf(150)},
            server={},
            check=says("g.gbnf"),
        ),
        Case(
            c,
            "generate --ebnf on plain OpenAI",
            gen("--ebnf", "{d}/g.gbnf", "x"),
            2,
            files={"g.gbnf": 'root ::= "a"\n'},
            server={},
        ),
        Case(
            c,
            "generate --regex '(' (vllm)",
            ["generate", *VLLM, *FAST, "--regex", "(", "x"],
            2,
            server={},
            check=says("--regex"),
        ),
        Case(c, "generate --grammar @nope", gen("--grammar", "@nope", "x"), 2, server={}, check=says("@nope")),
        Case(
            c,
            "test: case file naming a missing grammar",
            ["test", "{d}/t.test.yaml"],
            2,
            files={"t.test.yaml": "grammar: nope.gbnf\ncases:\n  - input: a\n"},
            check=says("nope.gbnf"),
        ),
        Case(
            c,
            "test: case file not YAML",
            ["test", "{d}/t.test.yaml"],
            2,
            files={"t.test.yaml": "grammar: [unclosed\n  - : :\n"},
            check=says("t.test.yaml"),
        ),
    ]
    return cases


def template_cases() -> list[Case]:
    c = "templates"
    messages = "{d}/m.json"
    files = {"m.json": json.dumps([{"role": "user", "content": "hi"}])}
    t = {
        "endless loop": "{% for i in range(99999) %}{% for j in range(99999) %}{{ i }}{% endfor %}{% endfor %}",
        "busy loop": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
        "raises": "{{ raise_exception('no chats today') }}",
        "undefined names": "{{ messages[0].nope.deeper }}{{ undefined_function() }}",
        "huge output": "{{ 'x' * 10**9 }}",
        "syntax error": "{% for m in messages %}{{ m.content }",
        "recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "division by zero": "{{ 1 / 0 }}",
        "not a string": None,
    }
    cases = []
    for name, template in t.items():

        def setup(ctx, template=template):
            _tokenizer_folder(ctx, template)  # a template that is JSON null: no template at all

        expect = 0 if template is None else 2
        cases.append(
            Case(
                c,
                f"template render: {name}",
                ["template", "render", "--tokenizer", "{d}/model", "--messages", messages],
                expect,
                setup=setup,
                files=dict(files),
                check=None if template is None else says("chat template"),
            )
        )
        if name in ("endless loop", "raises", "undefined names", "huge output"):
            cases.append(
                Case(
                    c,
                    f"generate --model: {name}",
                    ["generate", "--model", "{d}/model", *SCHEMA, "--max-tokens", "4", "x"],
                    2,
                    setup=setup,
                    check=says("chat template"),
                )
            )
    cases.append(
        Case(
            c,
            "template render: messages not JSON",
            ["template", "render", "--messages", "{d}/m.json"],
            2,
            files={"m.json": "[{"},
            check=says("m.json:1"),
        )
    )
    cases.append(
        Case(
            c,
            "template render: messages wrong shape",
            ["template", "render", "--messages", "{d}/m.json"],
            2,
            files={"m.json": '[{"role": 5}]'},
            check=says("m.json"),
        )
    )
    cases.append(
        Case(
            c,
            "template render: messages NaN",
            ["template", "render", "--messages", "{d}/m.json"],
            2,
            files={"m.json": '[{"role": "user", "content": NaN}]'},
            check=says("m.json:1"),
        )
    )
    return cases


def _fifo_folder(ctx: Ctx) -> None:
    ctx.write("fo/capital.schema.json", CAPITAL.read_text())
    os.mkfifo(ctx.path("fo/pipe.json"))


def batch_cases() -> list[Case]:
    c = "batches"
    run = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--concurrency", "2")
    good = [{"id": i, "prompt": f"q{i}"} for i in range(6)]
    mixes = {
        "bad JSON line among good ones": (good[:3] + ["{not json"] + good[3:], list(range(6)) + ["line-4"], 1),
        "non-UTF-8 line": (None, None, 1),
        "line without a prompt": (good[:2] + [{"id": "x"}] + good[2:4], [0, 1, "x", 2, 3], 1),
        "prompt not a string": (good[:2] + [{"id": "n", "prompt": 5}], [0, 1, "n"], 1),
        "a JSON array line": (good[:2] + ["[1, 2]"] + good[2:3], [0, 1, "line-3", 2], 1),
        "duplicate ids": (good[:3] + [{"id": 1, "prompt": "again"}], [0, 1, 2, 1], 0),
        "ids of mixed types": (
            [{"id": 1, "prompt": "a"}, {"id": "1", "prompt": "b"}, {"id": None, "prompt": "c"}],
            None,
            (0, 1),
        ),
        "blank lines": (good[:2] + ["", "   "] + good[2:3], [0, 1, 2], 0),
        "messages instead of prompt": ([{"id": "m", "messages": [{"role": "user", "content": "hi"}]}], ["m"], 0),
        "messages of the wrong shape": ([{"id": "m", "messages": "hi"}] + good[:1], ["m", 0], 1),
        "a prompt with a lone surrogate": (
            good[:2] + ['{"id": "s", "prompt": "b \\ud800"}'] + good[2:3],
            [0, 1, "line-3", 2],
            1,
        ),
    }
    cases = []
    for name, (rows, ids, code) in mixes.items():
        if rows is None:  # non-UTF-8
            data = (prompts(2) + '{"id": "bad", "prompt": "caf').encode() + b'\xe9"}\n' + prompts(1, 2).encode()
            ids = [0, 1, "line-3", 2]
        else:
            data = jsonl(rows).encode()
        rec = ("o.jsonl", ids) if ids is not None else None
        cases.append(Case(c, name, run, code, files={"p.jsonl": data}, server={}, records=rec))
    cases += [
        Case(  # its own error record, the others answered (until 2026-12-06: exit 2 for the whole batch)
            c,
            "a line over --max-prompt-bytes",
            [*run, "--max-prompt-bytes", "1000"],
            1,
            files={"p.jsonl": prompts(2) + json.dumps({"id": "big", "prompt": "x" * 5000}) + "\n" + prompts(1, 2)},
            server={},
            records=("o.jsonl", [0, 1, "line-3", 2]),
            check=says("p.jsonl:3", "--max-prompt-bytes"),
        ),
        Case(
            c,
            "server answers invalid JSON for every line",
            run,
            1,
            files={"p.jsonl": prompts(4)},
            server={"mode": "invalid"},
            records=("o.jsonl", list(range(4))),
        ),
        # the first request fails: the run never starts (exit 2, no output), as with nothing listening
        Case(
            c,
            "server 500 for every line",
            [*run],
            2,
            files={"p.jsonl": prompts(3)},
            server={"mode": "500"},
            check=lambda ctx, run: ctx.path("o.jsonl").exists() and ctx.problems.append("o.jsonl was created"),
        ),
        Case(
            c,
            "batch from stdin",
            gen(*SCHEMA, "--input", "-", "-o", "{d}/o.jsonl"),
            0,
            stdin=prompts(3).encode(),
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(c, "200 lines", run, 0, files={"p.jsonl": prompts(200)}, server={}, records=("o.jsonl", list(range(200)))),
    ]
    return cases


def output_cases() -> list[Case]:
    c = "outputs"
    old = '{"id": 0, "text": "kept"}\n'
    batch = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl")
    p3 = {"p.jsonl": prompts(3)}
    defs = '{"$defs": {"c": {"type": "string"}}}'
    cases = [
        Case(
            c,
            "--output --force onto a file the schema's $ref reads",
            gen("--schema", "{d}/s.json", "-o", "{d}/defs.json", "--force", "x"),
            2,
            files={"defs.json": defs, "s.json": '{"properties": {"c": {"$ref": "defs.json#/$defs/c"}}}'},
            server={},
            check=both(untouched("defs.json", defs), says("$ref")),
        ),
        Case(
            c,
            "existing output without --resume/--force",
            batch,
            2,
            files={**p3, "o.jsonl": old},
            server={},
            check=both(untouched("o.jsonl", old), says("--resume", "--force")),
        ),
        Case(
            c,
            "existing output, single prompt",
            gen(*SCHEMA, "-o", "{d}/o.jsonl", "x"),
            2,
            files={"o.jsonl": old},
            server={},
            check=untouched("o.jsonl", old),
        ),
        Case(
            c,
            "--force, server unreachable",
            [*batch, "--force"],
            2,
            files={**p3, "o.jsonl": old},
            check=untouched("o.jsonl", old),
        ),
        Case(
            c,
            "--resume, server unreachable",
            [*batch, "--resume"],
            2,
            files={**p3, "o.jsonl": old},
            check=untouched("o.jsonl", old),
        ),
        Case(
            c,
            "--resume, server answers HTML",
            [*batch, "--resume"],
            2,
            files={**p3, "o.jsonl": old},
            server={"mode": "html", "models": "html"},
            check=untouched("o.jsonl", old),
        ),
        Case(
            c,
            "--force, bad schema",
            [*gen("--schema", "{d}/s.json", "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl"), "--force"],
            2,
            files={**p3, "o.jsonl": old, "s.json": "{"},
            server={},
            check=untouched("o.jsonl", old),
        ),
        Case(
            c,
            "--resume appends the missing ids",
            [*batch, "--resume"],
            0,
            files={**p3, "o.jsonl": _rec(0)},
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(
            c,
            "--resume cuts a partial last line",
            [*batch, "--resume"],
            0,
            files={**p3, "o.jsonl": _rec(0) + _rec(1)[:25]},
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(
            c,
            "--resume re-answers error records",
            [*batch, "--resume"],
            0,
            files={**p3, "o.jsonl": _rec(0) + _rec(1, error=True)},
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(
            c,
            "--resume over a garbage line in the middle",
            [*batch, "--resume"],
            2,
            files={**p3, "o.jsonl": _rec(0) + "garbage\n" + _rec(1)},
            server={},
            check=says("o.jsonl:2"),
        ),
        Case(
            c,
            "--resume over a non-record file",
            [*batch, "--resume"],
            2,
            files={**p3, "o.jsonl": "just some notes\n"},
            server={},
            check=untouched("o.jsonl", "just some notes\n"),
        ),
        Case(
            c,
            "--resume over a binary file",
            [*batch, "--resume"],
            2,
            files={**p3, "o.jsonl": b"\x00\xff" * 100},
            server={},
        ),
        Case(
            c,
            "--resume with duplicates already written",
            [*batch, "--resume"],
            (0, 1),
            files={**p3, "o.jsonl": _rec(0) + _rec(0)},
            server={},
        ),
        Case(
            c,
            "--force replaces",
            [*batch, "--force"],
            0,
            files={**p3, "o.jsonl": _rec(0) + _rec(7)},
            server={},
            records=("o.jsonl", [0, 1, 2]),
        ),
        Case(c, "-o a directory", gen(*SCHEMA, "-o", "{d}", "x"), 2, server={}, check=says("directory")),
        Case(c, "-o in a missing folder", gen(*SCHEMA, "-o", "{d}/no/such/o.jsonl", "x"), 2, server={}),
        Case(c, "-o /dev/full", gen(*SCHEMA, "-o", "/dev/full", "x"), 2, server={}),
        Case(
            c,
            "-o is the input",
            gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/p.jsonl", "--force"),
            2,
            files=dict(p3),
            server={},
            check=untouched("p.jsonl", prompts(3)),
        ),
        Case(
            c,
            "-o where no file can be created (/proc)",
            gen(*SCHEMA, "-o", "/proc/sgcli-x.jsonl", "x"),
            2,
            server={},
            check=says("/proc/sgcli-x.jsonl"),
        ),
        Case(
            c,
            "two concurrent --resume runs",
            run=_concurrent,
            files={"p.jsonl": prompts(30)},
            server={"delay": 0.15},
            records=("o.jsonl", list(range(30))),
        ),
    ]
    return cases


def _rec(i, error=False) -> str:
    if error:
        return json.dumps({"id": i, "text": None, "finish_reason": "error", "valid": None, "errors": ["gone"]}) + "\n"
    return json.dumps({"id": i, "text": ANSWER, "finish_reason": "stop", "valid": True}) + "\n"


def _wait_for(pred, timeout: float) -> bool:
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _lines(ctx: Ctx, name: str = "o.jsonl") -> int:
    p = ctx.path(name)
    return p.read_bytes().count(b"\n") if p.exists() else 0


def _concurrent(ctx: Ctx) -> list[Run]:
    args = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--resume", "--concurrency", "1")
    first = start(ctx, args)
    _wait_for(lambda: _lines(ctx) >= 2, 30)
    second = sgcli(ctx, args, 2)
    if str(first.pid) not in second.stderr:
        ctx.problems.append(f"the second run does not name the first's pid {first.pid}: {second.stderr[:200]!r}")
    return [finish(ctx, first, args, 0), second]


def signal_cases() -> list[Case]:
    c = "signals"
    cases = []
    for sig in ("SIGINT", "SIGTERM", "SIGKILL"):
        cases.append(
            Case(
                c,
                f"{sig} mid-batch, then --resume",
                run=_interrupted(sig),
                files={"p.jsonl": prompts(40)},
                server={"delay": 0.1},
                records=("o.jsonl", list(range(40))),
            )
        )
    cases.append(
        Case(
            c,
            "SIGINT twice mid-batch, then --resume",
            run=_interrupted("SIGINT", twice=True),
            files={"p.jsonl": prompts(40)},
            server={"delay": 0.1},
            records=("o.jsonl", list(range(40))),
        )
    )
    cases.append(Case(c, "SIGTERM on a single prompt", run=_single_term, server={"delay": 5.0}))
    cases.append(
        Case(
            c,
            "SIGTERM while the server hangs",
            run=_hung_server_term,
            files={"p.jsonl": prompts(3)},
            server={"mode": "slow"},
        )
    )
    return cases


def _interrupted(sig: str, twice: bool = False):
    def run(ctx: Ctx) -> list[Run]:
        args = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--concurrency", "2")
        p = start(ctx, args)
        _wait_for(lambda: _lines(ctx) >= 5, 30)
        p.send_signal(getattr(signal, sig))
        if twice:
            time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGINT)
        # a second Ctrl-C during the first one's cleanup ends the process by SIGINT (-2): the shell says 130 too
        codes = {"SIGINT": (130, -2) if twice else 130, "SIGTERM": 130, "SIGKILL": -9}[sig]
        first = finish(ctx, p, args, codes)
        if sig != "SIGKILL" and _lines(ctx) >= 40:
            ctx.problems.append("the batch finished before the signal: nothing was interrupted")
        return [first, sgcli(ctx, [*args, "--resume"], 0)]

    return run


def _single_term(ctx: Ctx) -> list[Run]:
    """A single prompt ended by SIGTERM: exit 130 as Ctrl-C, and the output's lock given back."""
    args = gen(*SCHEMA, "-o", "{d}/one.jsonl", "x")
    p = start(ctx, args)
    _wait_for(lambda: ctx.server is not None and ctx.server.posts > 0, 20)
    p.send_signal(signal.SIGTERM)
    run = finish(ctx, p, args, 130)
    if ctx.path("one.jsonl.lock").exists():
        ctx.problems.append("the output's lock was left behind")
    return [run]


def _hung_server_term(ctx: Ctx) -> list[Run]:
    args = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--request-timeout", "60")
    p = start(ctx, args)
    _wait_for(lambda: ctx.server is not None and ctx.server.posts > 0, 20)
    time.sleep(0.3)
    t = time.monotonic()
    p.send_signal(signal.SIGTERM)
    run = finish(ctx, p, args, 130, timeout=(time.monotonic() - p.sgcli_t) + 10)  # type: ignore[attr-defined]
    if time.monotonic() - t > 5:
        ctx.problems.append(f"SIGTERM took {time.monotonic() - t:.1f} s to end the run")
    return [run]


def server_cases() -> list[Case]:
    c = "servers"
    # a single prompt streams (an event stream is expected: a JSON reply is refused as such); a batch
    # posts each line and reads JSON
    modes = {
        # mode: (single prompt exit, needles)
        "nonjson": (2, ["{url}", "not an event stream"]),
        "html": (2, ["{url}", "text/html"]),
        "500": (2, ["{url}", "HTTP 500"]),
        "400": (2, ["{url}", "bad schema"]),
        "truncated": (2, ["{url}"]),
        "short-body": (2, ["{url}"]),
        "slow": (2, ["{url}", "--request-timeout"]),
        "drip": (2, ["{url}"]),
        "reset": (2, ["{url}"]),
        "shape": (2, ["{url}"]),
        "array": (2, ["{url}"]),
        "empty-choices": (2, ["{url}"]),
        "null-content": (2, ["{url}"]),
        "non-utf8": (2, ["{url}"]),
        "bad-event": (2, ["{url}", "not JSON"]),
        "stream-cut": (1, []),  # the text so far, finish unknown: not valid (exit 1)
        "invalid": (1, []),
        "endless-stream": (2, ["--request-timeout"]),
        "surrogate": (2, ["{url}", "lone surrogate"]),
        # a batch's answer "cannot be decoded"; a stream's is first an answer that is no event stream
        "gzip-lie": (2, ["{url}", "sent a reply sgcli cannot use"]),
        "redirect": (2, ["{url}", "HTTP 307, a redirect to /v2/elsewhere"]),
        "401": (2, ["{url}", "--api-key-env"]),
        "sse-multiline": (0, []),
    }
    cases = []
    for mode, (code, needles) in modes.items():
        timeout = ["--request-timeout", "2"] if mode in ("slow", "endless-stream", "drip") else []
        cases.append(
            Case(
                c,
                f"{mode}: one prompt",
                [*gen(*SCHEMA, "x"), *timeout],
                code,
                server={"mode": mode},
                check=says(*needles) if needles else None,
            )
        )
        if mode in ("invalid", "endless-stream", "bad-event", "stream-cut", "sse-multiline"):  # stream-only
            continue
        # every 2nd request misbehaves (the first answers, so the run starts): error records, exit 1
        cases.append(
            Case(
                c,
                f"{mode}: every 2nd of a batch of 6",
                [*gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--concurrency", "1"), *timeout],
                1,
                files={"p.jsonl": prompts(6)},
                server={"mode": mode, "every": 2},
                records=("o.jsonl", list(range(6))),
                check=_errors_then_resume,
            )
        )
    for models in ("404", "html", "shape"):
        cases.append(
            Case(
                c,
                f"/v1/models {models}, no --served-model",
                ["generate", "--engine", "openai", "--base-url", "{url}", *FAST, *SCHEMA, "x"],
                2,
                server={"models": models},
                check=says("list the models"),
            )
        )
    cases += [
        Case(c, "nothing listening", gen(*SCHEMA, "x"), 2, check=says("cannot reach")),
        Case(
            c,
            "500 with retries",
            [*gen(*SCHEMA, "x"), "--retries", "2"],
            2,
            server={"mode": "500"},
            check=says("3 attempts"),
        ),
        Case(
            c,
            "a port that is not HTTP",
            ["generate", "--engine", "openai", "--base-url", "{url}", *FAST, *SCHEMA, "x"],
            2,
            setup=_not_http,
        ),
    ]
    return cases


def _errors_then_resume(ctx: Ctx, run: Run) -> None:
    """Three error records among six; a --resume against a server that now answers fills them in."""
    path = ctx.path("o.jsonl")
    errors = [r for r in map(json.loads, path.read_text().splitlines()) if r.get("finish_reason") == "error"]
    if len(errors) != 3:
        ctx.problems.append(f"{len(errors)} error records, not 3")
    assert ctx.server is not None
    ctx.server.mode = "ok"
    again = sgcli(ctx, gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--resume"), 0)
    if again.code != 0:
        ctx.problems.append(f"--resume after the error records: exit {again.code}: {again.stderr[-300:]!r}")


def _not_http(ctx: Ctx) -> None:
    """A loopback port that accepts and answers garbage bytes (not HTTP), in place of the server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def serve():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError):
                conn.recv(4096)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff garbage\r\n\r\n")
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    port = sock.getsockname()[1]

    class Fake:
        url = f"http://127.0.0.1:{port}"
        posts = 0

        def stop(self):
            stop.set()
            sock.close()

    ctx.server = Fake()  # type: ignore[assignment]


def disk_cases() -> list[Case]:
    c = "disks"
    return [
        Case(
            c,
            "output disk fills mid-batch",
            run=_disk_fills,
            files={"p.jsonl": prompts(400)},
            server={"answer": json.dumps({"country": "F" * 50, "capital": "P" * 50}, separators=(",", ":"))},
        ),
        Case(c, "output disk full at start", run=_disk_full_at_start, files={"p.jsonl": prompts(5)}, server={}),
        Case(c, "model cache on a full disk", run=_model_cache_full),
        Case(c, "compiled-grammar cache on a full disk", run=_cache_full),
        Case(c, "generate: stdout is /dev/full", run=_stdout_full, server={}),
        Case(c, "lint --json: stdout is /dev/full", run=_stdout_full),
    ]


def _stdout_full(ctx: Ctx) -> list[Run]:
    """Records to a stdout that cannot take them: exit 2 naming the full disk, no traceback."""
    args = gen(*SCHEMA, "--json", "x") if ctx.server else ["lint", str(CAPITAL), "--json"]
    t = time.monotonic()
    with open("/dev/full", "wb") as full:
        p = subprocess.run(
            [sys.executable, "-m", "sgcli", *ctx.sub(args)],
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=ctx.dir,
            env=_env(ctx),
            timeout=LIMIT_S,
        )
    run = Run(ctx.sub(args), (2,), p.returncode, time.monotonic() - t, "", _text(p.stderr))
    says("No space left")(ctx, run)
    return [run]


def _disk_fills(ctx: Ctx) -> list[Run]:
    folder = _mount_tmpfs(ctx, "small", "64k")
    if folder is None:
        ctx.problems.append("cannot mount a tmpfs (not root?): case not run")
        return []
    args = gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/small/o.jsonl")
    run = sgcli(ctx, args, 2)
    if "No space left" not in run.stderr and "full" not in run.stderr:
        ctx.problems.append(f"stderr does not say the disk is full: {run.stderr[-300:]!r}")
    kept = ctx.path("small/o.jsonl").read_bytes() if ctx.path("small/o.jsonl").exists() else b""
    # every finished line is a whole record; then free the space and resume: nothing lost or repeated
    if kept:
        shutil.copy(ctx.path("small/o.jsonl"), ctx.path("o.jsonl"))
    damaged = [i for i, line in enumerate(kept.split(b"\n")[:-1], 1) if not _is_record(line)]
    if damaged:
        ctx.problems.append(f"lines {damaged[:5]} of the full disk's output are not whole records")
    resumed = sgcli(ctx, gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/o.jsonl", "--resume"), 0)
    ctx.records_override = ("o.jsonl", list(range(400)))  # type: ignore[attr-defined]
    return [run, resumed]


def _is_record(line: bytes) -> bool:
    try:
        return "id" in json.loads(line)
    except ValueError:
        return False


def _disk_full_at_start(ctx: Ctx) -> list[Run]:
    folder = _mount_tmpfs(ctx, "small", "64k")
    if folder is None:
        ctx.problems.append("cannot mount a tmpfs (not root?): case not run")
        return []
    _fill(folder, 0)
    run = sgcli(ctx, gen(*SCHEMA, "--input", "{d}/p.jsonl", "-o", "{d}/small/o.jsonl"), 2)
    if "No space left" not in run.stderr and "full" not in run.stderr:
        ctx.problems.append(f"stderr does not say the disk is full: {run.stderr[-300:]!r}")
    return [run]


def _model_cache_full(ctx: Ctx) -> list[Run]:
    """The default tokenizer is converted into the cache on first use: a full cache disk is exit 2
    naming SGCLI_CACHE_DIR (docs/limits.md, "Full disk")."""
    folder = _mount_tmpfs(ctx, "cache", "256k")
    if folder is None:
        ctx.problems.append("cannot mount a tmpfs (not root?): case not run")
        return []
    _fill(folder, 4096)
    ctx.env["SGCLI_CACHE_DIR"] = str(folder)
    run = sgcli(ctx, ["compile", str(CAPITAL)], 2)
    says("SGCLI_CACHE_DIR", "full")(ctx, run)
    return [run]


def _cache_full(ctx: Ctx) -> list[Run]:
    """The tokenizer converted first (a 3.4 MB folder), then the disk filled: compiles go on without
    the compiled-grammar cache (a notice at most), exit 0, twice."""
    folder = _mount_tmpfs(ctx, "cache", "16m")
    if folder is None:
        ctx.problems.append("cannot mount a tmpfs (not root?): case not run")
        return []
    ctx.env["SGCLI_CACHE_DIR"] = str(folder)
    first = sgcli(ctx, ["compile", "@json", "--backend", "llguidance"], 0)
    _fill(folder, 0)
    grammar = ctx.write("g.gbnf", _left_recursive_gbnf(300))  # a compile that may be worth storing
    return [
        first,
        sgcli(ctx, ["compile", str(grammar), "--compile-timeout", "20"], 0),
        sgcli(ctx, ["compile", "@sql", "--compile-timeout", "20"], 0),
    ]


def catalogue() -> list[Case]:
    return [
        *flag_cases(),
        *file_cases(),
        *schema_cases(),
        *grammar_cases(),
        *template_cases(),
        *batch_cases(),
        *output_cases(),
        *server_cases(),
        *disk_cases(),
        *signal_cases(),
        *tour_cases(),
    ]


def tour_cases() -> list[Case]:
    """Found by a hostile-input tour on 2026-12-07, each in the category it belongs to."""
    deep_json = '{"a":' * 3000 + "1" + "}" * 3000
    project = {"sgcli.toml": 'cache-dir = "."\n', "src/main.py": "keep", ".git/HEAD": "keep", "models/m.bin": "keep"}
    kept = both(untouched("src/main.py", "keep"), untouched(".git/HEAD", "keep"), untouched("models/m.bin", "keep"))
    return [
        Case(
            "files",
            "sgcli.toml nested 5,000 deep",
            ["config"],
            2,
            files={"sgcli.toml": "a = " + "[" * 5000 + "]" * 5000},
        ),
        Case(
            "files",
            "pyproject.toml of 3 MB",
            ["config"],
            2,
            files={"pyproject.toml": "[tool.sgcli]\n" + "#" * (3 << 20)},
        ),
        Case(
            "files",
            "cache clear with cache-dir '.' in a project",
            ["cache", "clear"],
            2,
            files=project,
            env={"SGCLI_CACHE_DIR": ""},
            check=both(kept, says("left alone")),
        ),
        Case(
            "flags",
            "--chat-template-kwargs nested 3,000 deep",
            gen(*SCHEMA, "--chat-template-kwargs", deep_json, "x"),
            2,
            server={},
            check=says("nested more than 512"),
        ),
        Case(
            "files",
            "bench: a JSONL line nested 3,000 deep",
            ["bench", "{d}/b.jsonl", "--backend", "llguidance"],
            2,
            files={
                "b.jsonl": '{"schema": {"type": "integer"}, "instances": [1]}\n{"schema":'
                + "[" * 3000
                + "]" * 3000
                + "}\n"
            },
            check=says("nested more than 512", where="stdout"),
        ),
        Case(
            "grammars",
            "%llguidance options nested 3,000 deep",
            ["convert", "{d}/o.lark", "--to", "gbnf"],
            2,
            files={"o.lark": "%llguidance " + deep_json + '\nstart: "a"\n'},
            check=says("nested more than 512"),
        ),
        Case(
            "servers",
            "an event that never ends (40 MB, no newline)",
            gen(*SCHEMA, "--retries", "0", "x"),
            2,
            server={"mode": "endless-line"},
            check=says("ran past"),
        ),
        Case(
            "servers",
            "an output nested past the checker, wrong at its top",
            gen(*SCHEMA, "--json", "x"),
            1,
            server={"mode": "deep-output"},
            check=says("at the top", where="stdout"),
        ),
        Case(
            "schemas",
            "lint: minLength 1e30",
            ["lint", "{d}/s.json"],
            (0, 1),
            files={"s.json": '{"type": "string", "minLength": 1e30}'},
            check=never("Error:"),
        ),
    ]


# --------------------------------------------------------------------------------------------
# Running and counting
# --------------------------------------------------------------------------------------------


def run_case(case: Case) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="sgcli-hostile-"))
    folder.chmod(0o755)
    ctx = Ctx(folder, env=dict(case.env))
    runs: list[Run] = []
    error = None
    try:
        for name, data in case.files.items():
            ctx.write(name, data(ctx) if callable(data) else data)
        if case.server is not None:
            ctx.server = Server(**case.server)
        if case.setup:
            case.setup(ctx)
        if case.run:
            runs = case.run(ctx)
        else:
            runs = [sgcli(ctx, case.args, case.expect, stdin=case.stdin)]
        if case.check and runs:
            case.check(ctx, runs[-1])
        records = getattr(ctx, "records_override", None) or case.records
        if records:
            count_records(ctx, *records)
    except Exception as exc:  # the benchmark's own failure: counted, never hidden
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if ctx.server is not None:
            ctx.server.stop()
        for cleanup in reversed(ctx.cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    return _judge(case, ctx, runs, error)


def _judge(case: Case, ctx: Ctx, runs: list[Run], error: str | None) -> dict:
    rows = []
    for r in runs:
        output = r.stdout + r.stderr
        rows.append(
            {
                "args": r.args,
                "exit": r.code,
                "expect": list(r.expect),
                "seconds": round(r.seconds, 2),
                "traceback": TRACEBACK in output or "internal error" in output,
                "wrong": not r.timed_out and r.code not in r.expect,
                "over": r.timed_out or r.seconds > LIMIT_S,
                "stderr": r.stderr.strip()[-600:],
            }
        )
    problems = list(ctx.problems) + ([f"benchmark error: {error}"] if error else [])
    if not runs and not error:
        problems.append("no run")
    bad = (
        any(r["exit"] == 3 or r["traceback"] or r["wrong"] or r["over"] for r in rows)
        or ctx.lost
        or ctx.duplicated
        or problems
    )
    return {
        "category": case.category,
        "name": case.name,
        "runs": rows,
        "lost": ctx.lost,
        "duplicated": ctx.duplicated,
        "problems": problems,
        "ok": not bad,
    }


COLUMNS = (
    "cases",
    "runs",
    "exit 0",
    "exit 1",
    "exit 2",
    "exit 3",
    "other exit",
    "tracebacks",
    "wrong code",
    "over 60 s",
    "lost",
    "duplicated",
    "failed checks",
)


def counts(results: list[dict]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for res in results:
        for key in (res["category"], "total"):
            row = table.setdefault(key, dict.fromkeys(COLUMNS, 0))
            row["cases"] += 1
            row["lost"] += res["lost"]
            row["duplicated"] += res["duplicated"]
            row["failed checks"] += len(res["problems"])
            for r in res["runs"]:
                row["runs"] += 1
                if r["exit"] is not None:  # None: stopped at 60 s
                    row[f"exit {r['exit']}" if r["exit"] in (0, 1, 2, 3) else "other exit"] += 1
                row["tracebacks"] += r["traceback"]
                row["wrong code"] += r["wrong"]
                row["over 60 s"] += r["over"]
    if "total" in table:
        table["total"] = table.pop("total")
    return table


def print_table(table: dict[str, dict[str, int]]) -> None:
    print("| category | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for key, row in table.items():
        label = f"**{key}**" if key == "total" else key
        print(f"| {label} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")


def select(cases: list[Case], only: str | None, name: str | None, limit: int | None) -> list[Case]:
    if only:
        wanted = {x.strip() for x in only.split(",") if x.strip()}
        unknown = wanted - {c.category for c in cases}
        if unknown:
            raise SystemExit(f"--only: no category {sorted(unknown)}; there are {sorted({c.category for c in cases})}")
        cases = [c for c in cases if c.category in wanted]
    if name:
        cases = [c for c in cases if name.lower() in c.name.lower()]
    return cases[:limit] if limit else cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", help="comma-separated categories: " + ", ".join(sorted({c.category for c in catalogue()}))
    )
    parser.add_argument("--name", help="only cases whose name contains this")
    parser.add_argument("--limit", type=int, help="the first N cases (after --only/--name)")
    parser.add_argument("--json", action="store_true", help="print every result and the counts as JSON")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each case as it ends")
    args = parser.parse_args(argv)
    cases = select(catalogue(), args.only, args.name, args.limit)
    results = []
    t = time.monotonic()
    for case in cases:
        res = run_case(case)
        results.append(res)
        if args.verbose or not res["ok"]:
            codes = ",".join(str(r["exit"]) for r in res["runs"])
            mark = "ok " if res["ok"] else "BAD"
            print(f"{mark} [{res['category']}] {res['name']}: exit {codes}", file=sys.stderr)
            if not res["ok"]:
                for r in res["runs"]:
                    if r["traceback"] or r["wrong"] or r["over"] or r["exit"] == 3:
                        print(
                            f"      expected {r['expect']}, got {r['exit']} in {r['seconds']} s; "
                            f"args {' '.join(r['args'])[:200]}\n      stderr: {r['stderr'][-400:]!r}",
                            file=sys.stderr,
                        )
                for p in res["problems"]:
                    print(f"      check: {p[:400]}", file=sys.stderr)
                if res["lost"] or res["duplicated"]:
                    print(f"      records lost {res['lost']}, duplicated {res['duplicated']}", file=sys.stderr)
    table = counts(results)
    if args.json:
        print(json.dumps({"seconds": round(time.monotonic() - t, 1), "counts": table, "results": results}, indent=1))
    else:
        print_table(table)
        print(f"\n{len(cases)} cases in {time.monotonic() - t:.0f} s; {sum(not r['ok'] for r in results)} bad")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
