"""The traced agent of the cross-process telemetry test (`loopstate worker --agent
otel_agent:agent`): each process that imports it exports its spans over OTLP/HTTP to the
receiver named by LOOPSTATE_TEST_OTLP, synchronously (a span is sent when it ends, so nothing
waits in a buffer when the test stops the process).

`python otel_agent.py DB` starts a run that suspends on its gated call and prints
`RUN_ID CALL_ID`.
"""

from __future__ import annotations

import asyncio
import os
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from loopstate import Agent, MemoryStore, ScriptedModel, SQLiteStore, Store, tool
from loopstate.engine.models.scripted import call
from loopstate.telemetry import OTelHooks

provider = TracerProvider(resource=Resource.create({"service.name": sys.argv[0]}))
provider.add_span_processor(
    SimpleSpanProcessor(OTLPSpanExporter(endpoint=os.environ["LOOPSTATE_TEST_OTLP"]))
)
trace.set_tracer_provider(provider)


@tool(needs_approval=True)
def publish(page: str) -> str:
    """Publish a page."""
    return f"published {page}"


def agent(store: Store | None = None) -> Agent:
    script = [call("publish", {"page": "home"}), "published"]
    return Agent(
        ScriptedModel(script, by_step=True),
        [publish],
        store=store if store is not None else MemoryStore(),
        hooks=[OTelHooks(agent_name="publisher")],
    )


async def _start(db: str) -> None:
    result = await agent(SQLiteStore(db)).run("publish the home page")
    print(result.run_id, result.pending[0].call_id, flush=True)


if __name__ == "__main__":
    asyncio.run(_start(sys.argv[1]))
