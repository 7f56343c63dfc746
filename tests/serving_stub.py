"""A fault-injecting OpenAI-shaped HTTP server on loopback, for the client's retry paths only.

Each POST takes the next scripted behaviour ("ok" once the script is used up): an HTTP
status (429, 503, 400...), a connection reset, a slow answer, one dripped a byte at a time or a
stream that never ends (each read quick, the whole answer never in time), or ("raw", status, content
type, bytes[, headers]) sent as is. `models` is what GET /v1/models answers (a raw triple, or JSON; `listings` counts
them). An "ok" answer's text comes from `answer(body)`. Every request body is kept, in arrival order. Everything else
about serving is tested against a real vLLM (tests/test_serving_engine.py).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stub:
    def __init__(self, answer=lambda body: "ok", delay=lambda body: 0.0, models=None):
        self.script: list[tuple] = []
        self.models = models if models is not None else {"object": "list", "data": [{"id": "stub-model"}]}
        self.requests: list[dict] = []
        self.listings = 0  # GET /v1/models answered
        self.answer = answer
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with stub._lock:
                    stub.listings += 1
                if isinstance(stub.models, tuple):
                    self._raw(*stub.models)
                else:
                    self._send(200, stub.models)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with stub._lock:
                    stub.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    step = stub.script.pop(0) if stub.script else ("ok",)
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    self._answer(body, step)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _answer(self, body, step):
                kind = step[0]
                if kind == "reset":  # RST instead of an answer
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if kind == "slow":
                    time.sleep(step[1])
                if kind in ("drip", "endless"):  # each read quick, the answer never whole in time
                    try:
                        self._drip(body, step)
                    except OSError:  # the client gave up, as it should
                        pass
                    return
                if kind == "raw":
                    self._raw(*step[1:])
                    return
                if kind == "status":
                    headers = step[2] if len(step) > 2 else {}
                    self._send(step[1], {"error": {"message": f"stub says {step[1]}"}}, headers)
                    return
                time.sleep(stub.delay(body))
                text = stub.answer(body)
                finish = step[1] if kind == "ok" and len(step) > 1 else "stop"
                if body.get("stream"):
                    self._stream(text, finish)
                else:
                    self._send(200, _completion(body, text, finish))

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that stopped reading
                    self.wfile.write(data)

            def _raw(self, status, content_type, data, headers=None):
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, body, step):
                """("drip", s): the answer a byte (a stream: a character) every s seconds; ("endless",):
                a stream of one space every 20 ms that never finishes."""
                if step[0] == "drip" and not body.get("stream"):
                    data = json.dumps(_completion(body, stub.answer(body), "stop")).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(step[1])
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                pieces = list(stub.answer(body)) if step[0] == "drip" else iter(lambda: " ", None)
                for piece in pieces:
                    chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(step[1] if step[0] == "drip" else 0.02)

            def _stream(self, text, finish):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
                for i, piece in enumerate(pieces):
                    done = finish if i == len(pieces) - 1 else None
                    chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": done}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(pieces)}}
                self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _completion(body: dict, text: str, finish: str) -> dict:
    chat = "messages" in body
    choice = {"index": 0, "finish_reason": finish}
    choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
    return {
        "object": "chat.completion" if chat else "text_completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 7, "completion_tokens": max(1, len(text) // 3), "total_tokens": 0},
    }
