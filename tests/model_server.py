"""A real model server on 127.0.0.1 for tests: scripted replies over real HTTP.

It speaks OpenAI chat completions (`POST /v1/chat/completions` or `/chat/completions`) and
Anthropic messages (`POST /v1/messages`); a request with `"stream": true` is answered with
server-sent events in the provider's format (see `sse.py`), which a reply may cut short
(`cut`, `cut_how`: a clean end without a finish reason, a dropped connection, a stall) or pace
(`chunk_delay`). The server counts clients that went away mid-stream (`disconnects`).

It records every request (path, lower-cased headers, parsed JSON body) in arrival order,
answers with the next scripted reply, and fails the request (HTTP 500) when its script runs
out, so a test sees an unexpected call.

    with serve(tool_call_reply(("call_1", "read_file", {"path": "a"})), text_reply("Done.")) as s:
        model = LiteLLMModel("openai/test-model", api_base=s.openai_base, api_key="k")
        ...
    assert [r.body["messages"] for r in s.requests] == ...
"""

from __future__ import annotations

import dataclasses
import functools
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

import sse
from support.waiting import MARGIN

Call = tuple[str, str, dict[str, Any] | str]
"""One scripted tool call: `(id, name, arguments)`; a str is sent verbatim as the JSON text."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer: an assistant turn, an HTTP error, or a dropped connection."""

    text: str | None = None
    calls: tuple[Call, ...] = ()
    status: int = 200
    usage: tuple[int, int] = (11, 7)
    """(prompt tokens, completion tokens)."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    drop: bool = False
    """Close the connection without any response."""
    stall: bool = False
    """Answer nothing until the client goes away (counted in `disconnects`): a call that is
    in flight for as long as the test needs."""
    body: dict[str, Any] | None = None
    """A raw provider JSON body, sent as is (with `status`): a recorded real reply."""
    raw: bytes | None = None
    """A body sent byte for byte (with `status`, as JSON's content type): a malformed reply."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers (e.g. `("retry-after", "7")`)."""
    cut: int | None = None
    """Streamed: send only this many events (no finish reason), then end as `cut_how` says."""
    cut_how: Literal["clean", "drop", "stall"] = "clean"
    """`clean`: a well-formed end (`[DONE]` for OpenAI); `drop`: close the connection mid-body;
    `stall`: send nothing more until the client goes away."""
    chunk_delay: float = 0.0
    """Streamed: seconds before each event."""
    events: tuple[bytes, ...] | None = None
    """Streamed: these server-sent events, sent as they are (a recorded provider stream)."""


def text_reply(text: str, *, usage: tuple[int, int] = (11, 7)) -> Reply:
    return Reply(text=text, usage=usage)


def tool_call_reply(*calls: Call, text: str | None = None) -> Reply:
    return Reply(text=text, calls=calls)


def error_reply(status: int = 500) -> Reply:
    return Reply(status=status)


def raw_reply(
    body: dict[str, Any], *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
) -> Reply:
    """A provider's JSON body exactly as given: an OpenAI-format or Anthropic-format reply
    (or error), shaped after a real recorded response."""
    return Reply(body=body, status=status, headers=headers)


def raw_stream(body: dict[str, Any]) -> Reply:
    """A recorded OpenAI-format reply body, streamed as its provider streams it
    (`sse.openai_events_of`)."""
    return Reply(events=tuple(sse.openai_events_of(body)))


def cut_stream(reply: Reply, after: int, how: Literal["clean", "drop", "stall"]) -> Reply:
    """`reply`, streamed, ending after `after` events as `how` says."""
    return dataclasses.replace(reply, cut=after, cut_how=how)


def paced(reply: Reply, seconds: float) -> Reply:
    """`reply`, streamed with `seconds` before each event."""
    return dataclasses.replace(reply, chunk_delay=seconds)


def dropped_connection() -> Reply:
    return Reply(drop=True)


def stalled() -> Reply:
    """A reply that never comes: the call stays in flight until the client goes away."""
    return Reply(stall=True)


def delayed(reply: Reply, seconds: float) -> Reply:
    return dataclasses.replace(reply, delay=seconds)


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: dict[str, Any]
    raw: bytes = b""
    """The body's bytes as they arrived."""


@dataclass
class ModelServer:
    """The script and the record of one server; a context manager that runs it."""

    replies: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0
    disconnects: int = 0
    """Streams the client left before their end (a cancel, a stall, a closed connection)."""
    refuse_streams: bool = False
    """Answer every streamed request with a 400 saying streaming is not supported (as many
    OpenAI-compatible endpoints do), taking no reply from the script."""
    refused: int = 0
    """Streamed requests refused so far."""
    _arrived: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _httpd: ThreadingHTTPServer | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base(self) -> str:
        """The `api_base` for litellm's `openai/` provider (Anthropic's is `url`)."""
        return f"{self.url}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def script(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._arrived:
            self.replies.extend(replies)

    def record(self, request: Recorded) -> Reply | None:
        """Record one request and take its reply (None: the script ran out)."""
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
            index = len(self.requests) - 1
            return self.replies[index] if index < len(self.replies) else None

    def disconnected(self) -> None:
        with self._arrived:
            self.disconnects += 1
            self._arrived.notify_all()

    def wait_for_disconnects(self, count: int, timeout: float = MARGIN) -> None:
        """Block until `count` clients have gone away mid-stream."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self.disconnects >= count, timeout):
                raise TimeoutError(f"{self.disconnects} of {count} disconnects in {timeout} s")

    def wait_for_requests(self, count: int, timeout: float = MARGIN) -> None:
        """Block until `count` requests have arrived; from async code, in a thread:
        `await asyncio.to_thread(server.wait_for_requests, 1)`."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"{len(self.requests)} of {count} requests in {timeout} s")

    def __enter__(self) -> Self:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        # A short poll interval: `shutdown` waits up to one interval (0.5 s by default).
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._httpd is not None
        assert self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@contextmanager
def serve(*replies: Reply) -> Iterator[ModelServer]:
    """Run a model server on a free loopback port for the duration of the block."""
    with ModelServer(list(replies)) as server:
        yield server


def _args(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def openai_body(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": _args(args)}}
            for cid, name, args in reply.calls
        ]
    prompt, completion = reply.usage
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
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def anthropic_body(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for cid, name, args in reply.calls:
        parsed = json.loads(args) if isinstance(args, str) else args
        content.append({"type": "tool_use", "id": cid, "name": name, "input": parsed})
    prompt, completion = reply.usage
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }


def _error_body(anthropic: bool, status: int, message: str) -> dict[str, Any]:
    if anthropic:
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": status}}


def _events(reply: Reply, anthropic: bool, model: str, include_usage: bool) -> list[bytes]:
    calls = [(cid, name, _args(arguments)) for cid, name, arguments in reply.calls]
    finish = reply.cut is None
    if reply.events is not None:
        events = list(reply.events)
        if not finish:
            events = [e for e in events if b'"finish_reason": null' in e or b"[DONE]" in e]
    elif anthropic:
        events = sse.anthropic_events(reply.text, calls, reply.usage, model, finish=finish)
    else:
        events = sse.openai_events(reply.text, calls, reply.usage, model, include_usage,
                                   finish=finish)  # fmt: skip
    if reply.cut is None:
        return events
    clean_end = [b"data: [DONE]\n\n"] if reply.cut_how == "clean" and not anthropic else []
    return events[: reply.cut] + clean_end


def _gone(connection: socket.socket, wait: float = 0.0) -> bool:
    """Whether the client has closed its end (readable, and nothing left to read)."""
    readable, _, _ = select.select([connection], [], [], wait)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            raw = self.rfile.read(length)
            body = json.loads(raw or b"{}")
            self._streamed = bool(body.get("stream"))
            options = body.get("stream_options") or {}
            self._include_usage = bool(options.get("include_usage"))
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?")[0].rstrip("/")
            anthropic = path.endswith("/v1/messages")
            if self._streamed and server.refuse_streams:
                with server._arrived:
                    server.refused += 1
                message = "stream is not supported by this endpoint"
                self._send(400, _error_body(anthropic, 400, message))
                return
            reply = server.record(Recorded(self.path, headers, body, raw))
            if not anthropic and not path.endswith("/chat/completions"):
                self._send(404, _error_body(False, 404, f"no route {self.path}"))
            elif reply is None:
                self._send(500, _error_body(anthropic, 500, "the test script has no more replies"))
            else:
                self._answer(reply, anthropic, body.get("model", "test-model"))

        def _answer(self, reply: Reply, anthropic: bool, model: str) -> None:
            time.sleep(reply.delay)
            if reply.stall:
                deadline = time.monotonic() + 30
                while not _gone(self.connection, wait=0.05) and time.monotonic() < deadline:
                    pass
                self.close_connection = True
                server.disconnected()
            elif reply.drop:
                self.close_connection = True
            elif reply.body is not None or reply.raw is not None:
                self._send(reply.status, reply.raw or reply.body or {}, reply.headers)
            elif reply.status != 200:
                self._send(reply.status, _error_body(anthropic, reply.status, "scripted error"))
            elif self._streamed:
                self._stream(reply, _events(reply, anthropic, model, self._include_usage))
            else:
                self._send(200, (anthropic_body if anthropic else openai_body)(reply, model))

        def _stream(self, reply: Reply, events: list[bytes]) -> None:
            self.protocol_version = "HTTP/1.1"  # chunked: a dropped body is told from an end
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for event in events:
                    time.sleep(reply.chunk_delay)
                    if _gone(self.connection):
                        raise ConnectionResetError
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                if reply.cut is not None and reply.cut_how == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.cut is not None and reply.cut_how == "stall":
                    deadline = time.monotonic() + 30
                    while not _gone(self.connection, wait=0.05):
                        if time.monotonic() > deadline:
                            return
                    raise ConnectionResetError
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                server.disconnected()

        def _send(
            self, status: int, payload: dict[str, Any] | bytes,
            headers: tuple[tuple[str, str], ...] = (),
        ) -> None:  # fmt: skip
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            try:
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout or a cancellation under test)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler
