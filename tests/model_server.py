"""A real model server on 127.0.0.1 for tests: scripted replies over real HTTP.

It speaks OpenAI chat completions (`POST /v1/chat/completions`) and Anthropic messages
(`POST /v1/messages`), records every request (path, headers, JSON body) in order, and fails
the request (HTTP 500) when its script runs out, so a test sees an unexpected call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted assistant turn: text and/or tool calls `(id, name, arguments dict|str)`."""

    text: str | None = None
    calls: tuple[tuple[str, str, dict[str, Any] | str], ...] = ()
    status: int = 200


def text_reply(text: str) -> Reply:
    return Reply(text=text)


def tool_call_reply(
    *calls: tuple[str, str, dict[str, Any] | str], text: str | None = None
) -> Reply:
    return Reply(text=text, calls=calls)


def error_reply(status: int = 500) -> Reply:
    return Reply(status=status)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: dict[str, Any]


@dataclass
class ModelServer:
    replies: list[Reply]
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _next(self) -> Reply | None:
        index = len(self.requests) - 1
        return self.replies[index] if index < len(self.replies) else None


def _args(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def openai_body(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": _args(args)}}
            for cid, name, args in reply.calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def anthropic_body(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for cid, name, args in reply.calls:
        parsed = json.loads(args) if isinstance(args, str) else args
        content.append({"type": "tool_use", "id": cid, "name": name, "input": parsed})
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append(Recorded(self.path, headers, body))
            reply = server._next()
            if reply is None or reply.status != 200:
                self._send(500 if reply is None else reply.status, {"error": {"message": "nope"}})
                return
            model = body.get("model", "test-model")
            if self.path.rstrip("/").endswith("/messages"):
                self._send(200, anthropic_body(reply, model))
            else:
                self._send(200, openai_body(reply, model))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@contextmanager
def serve(*replies: Reply) -> Iterator[ModelServer]:
    """Run a model server on a free loopback port for the duration of the block."""
    state = ModelServer(list(replies))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
