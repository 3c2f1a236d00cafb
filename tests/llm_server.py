"""A fake OpenAI-compatible provider for tests: a real HTTP server on 127.0.0.1 with scripted replies.

The LLM agent talks to it through the real LiteLLM client, exactly as it would talk
to vLLM or a hosted API, so retries, timeouts and error mapping are exercised for real::

    with ScriptedLLMServer() as server:
        server.script(tool_call("read_file", {"path": "reward.py"}), status(429), text("done"))
        completion(model="openai/test", api_base=server.api_base, api_key="test", ...)
        server.requests   # the JSON bodies received, in order

Each ``POST /v1/chat/completions`` (or ``/chat/completions``) takes the next scripted
reply; when the script is exhausted the server answers with ``server.default``
(a 500 error unless a test sets it).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_USAGE = {"prompt_tokens": 100, "completion_tokens": 20}


@dataclass
class Reply:
    """One scripted answer: an HTTP status and a JSON body, sent after ``delay_s``."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def _completion(message: dict, finish_reason: str, usage: dict | None) -> dict:
    used = dict(usage or DEFAULT_USAGE)
    used.setdefault("total_tokens", used["prompt_tokens"] + used["completion_tokens"])
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": used,
    }


def tool_calls(*calls: tuple[str, dict | str], usage: dict | None = None, content: str | None = None) -> Reply:
    """An assistant turn calling tools; a ``str`` argument is sent verbatim (for malformed JSON)."""
    items = [
        {"id": f"call_{i}_{name}", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": content, "tool_calls": items}
    return Reply(body=_completion(message, "tool_calls", usage))


def tool_call(name: str, args: dict | str, usage: dict | None = None) -> Reply:
    """An assistant turn with a single tool call."""
    return tool_calls((name, args), usage=usage)


def text(content: str, usage: dict | None = None) -> Reply:
    """A plain assistant message without tool calls."""
    return Reply(body=_completion({"role": "assistant", "content": content}, "stop", usage))


def status(code: int, message: str = "scripted error") -> Reply:
    """An HTTP error in OpenAI's error format (429 rate limit, 401 bad key, 500 ...)."""
    kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(code, "server_error")
    return Reply(status=code, body={"error": {"message": message, "type": kind, "code": kind}},
                 headers={"retry-after": "0"} if code == 429 else {})


def delayed(reply: Reply, seconds: float) -> Reply:
    """``reply`` sent only after ``seconds`` (longer than the client timeout: a timeout)."""
    return Reply(reply.status, reply.body, seconds, reply.headers)


class ScriptedLLMServer:
    """A threaded HTTP server answering chat completions from a queue of :class:`Reply`."""

    def __init__(self) -> None:
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict] = []
        self.default: Reply = status(500, "the test script is exhausted")
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))
                    return
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    reply = server._queue.popleft() if server._queue else server.default
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if "choices" in reply.body:  # echo the model asked for, as providers do (cost lookup)
                    reply = Reply(reply.status, reply.body | {"model": body.get("model", "scripted")},
                                  reply.delay_s, reply.headers)
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up: expected in timeout tests

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a handler sleeping past a client timeout must not delay teardown
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        """The ``api_base`` to give LiteLLM (``openai/<name>`` models)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    def start(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
