"""A tiny OTLP/HTTP trace receiver on 127.0.0.1 for tests: it parses each protobuf body it is
sent (`POST /v1/traces`, an `ExportTraceServiceRequest`) and keeps the spans, so a test reads
back exactly what processes exported, and waits for a span rather than for time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    scope: str
    """The instrumentation's name (`loopstate`; FastAPI's own for the service's requests)."""
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


class Receiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._changed = threading.Condition()
        self.endpoint = ""

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                service, scope = str(resource.get("service.name")), scope_spans.scope.name
                spans += [_span(service, scope, s) for s in scope_spans.spans]
        with self._changed:
            self.spans += spans
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: found(self.spans), timeout):
                names = [(s.service, s.name) for s in self.spans]
                raise AssertionError(f"spans not received within {timeout}s; got {names}")


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _span(service: str, scope: str, span: Any) -> ReceivedSpan:
    return ReceivedSpan(
        service=service,
        scope=scope,
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=_attributes(span.attributes),
    )


@contextmanager
def receiver() -> Iterator[Receiver]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.add(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
