"""Streaming costs, as ratios against floors measured in the same run.

    python bench/streaming.py             # everything
    python bench/streaming.py --engine    # only the engine's CPU per chunk (no server, no litellm)

Against a local OpenAI-format SSE server (tests/model_server.py, in a thread), for one reply
of CHUNKS text chunks:

- CPU per chunk on the event loop's thread (`time.thread_time`: the server thread is not
  counted) for: a raw httpx SSE reader (lines + json.loads, the floor); litellm alone
  (`acompletion(stream=True)` iterated); `LiteLLMModel.stream` with the engine's delta relay
  into a hook (MODEL, which litellm prices) through litellm's stream wrapper (`direct=False`)
  and on the fast path (`provider_stream.py`; one model kept across samples, after a first
  call fills its template and a second checks its direct reading); a whole `agent.stream`
  run (+ events, queue). The same fast path for a Groq-named model (the same OpenAI-format
  stream) and for Anthropic (its own SSE format, against a raw httpx reader of
  that stream: lines + json.loads of each event). Every other fast-path provider (`SHAPED`)
  on a stream shaped as it streams (tests/sse.py: DeepSeek's and Groq's reasoning deltas
  before the text, ...), per event, against the raw reader of that same stream.
- Time to first delta: litellm alone vs `agent.stream` (run creation, store, hooks included).
- Step overhead with a ScriptedModel: no listener (the plain `complete` path) vs a delta hook
  (the scripted model streams word by word).
- The engine's own CPU per chunk, with no network and no provider client: an in-process model
  streams a reply of N chunks through `agent.stream` (and through a delta hook); the same
  chunks consumed raw (the model's chunk source iterated into a list) are the floor. Per chunk
  = the slope between N = 200 and N = 2,000 of (loopstate - raw): the run's fixed cost (run
  creation, store, events) is left out; it is printed apart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import provider_replies as pr
import sse
from model_server import ModelServer, Reply, raw_stream, text_reply

from loopstate import Agent, Hooks, LiteLLMModel, MemoryStore, ScriptedModel, UserMessage
from loopstate.engine.messages import AssistantMessage
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm import _import_litellm
from loopstate.engine.streaming import DeltaListener, DeltaRelay, TextDelta

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
CHUNKS = 400
REPEATS = 7
MODEL = "openai/gpt-4o-mini"
REQUEST = ModelRequest(messages=(UserMessage(content="go"),), step=1)


class Sink(Hooks):
    def __init__(self) -> None:
        self.first: float | None = None
        self.count = 0

    async def on_text_delta(self, delta: TextDelta) -> None:
        self.count += 1
        if self.first is None:
            self.first = time.perf_counter()


def reply() -> Any:
    # distinct words: litellm refuses 100 identical consecutive chunks
    return text_reply(" ".join(f"w{i}" for i in range(CHUNKS)))


async def raw_httpx(server: ModelServer) -> float:
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "go"}],
            "stream_options": {"include_usage": True}}  # fmt: skip
    async with httpx.AsyncClient() as client:
        started = time.thread_time()
        async with client.stream("POST", f"{server.openai_base}/chat/completions", json=body) as r:
            chunks = 0
            async for line in r.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    json.loads(line[6:])
                    chunks += 1
        return (time.thread_time() - started) / chunks * 1e6


async def litellm_alone(server: ModelServer) -> tuple[float, float]:
    litellm = _import_litellm()
    started, wall = time.thread_time(), time.perf_counter()
    first = None
    stream = await litellm.acompletion(
        model=MODEL, api_base=server.openai_base, api_key="k", stream=True, num_retries=0,
        messages=[{"role": "user", "content": "go"}], stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = []
    async for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
        chunks.append(chunk)
    litellm.stream_chunk_builder(chunks, messages=[{"role": "user", "content": "go"}])
    assert first is not None
    return (time.thread_time() - started) / len(chunks) * 1e6, (first - wall) * 1e3


_HELD: dict[tuple[str, str, bool], LiteLLMModel] = {}


def held(name: str, base: str, direct: bool = True) -> LiteLLMModel:
    """One model per name, base and `direct`, kept across samples: a fast path (its templates,
    its learned rates) lives while a model holds it, as in a run."""
    key = (name, base, direct)
    if key not in _HELD:
        _HELD[key] = LiteLLMModel(name, api_base=base, api_key="k", direct=direct)
    return _HELD[key]


async def engine_model(server: ModelServer, direct: bool = True) -> float:
    model = held(MODEL, server.openai_base, direct)
    sink = Sink()
    started = time.thread_time()
    await model.stream(REQUEST, DeltaRelay("r", 1, time.time, sink))
    return (time.thread_time() - started) / sink.count * 1e6


def fast_stream(name: str, base: str) -> Any:
    """`LiteLLMModel(name).stream` on the fast path, CPU per delta."""

    async def measure(server: ModelServer) -> float:
        model = held(name, base.format(s=server))
        sink = Sink()
        started = time.thread_time()
        await model.stream(REQUEST, DeltaRelay("r", 1, time.time, sink))
        return (time.thread_time() - started) / sink.count * 1e6

    return measure


GROQ = fast_stream("groq/openai/gpt-oss-20b", "{s.openai_base}")
ANTHROPIC = fast_stream("anthropic/claude-sonnet-4-5", "{s.url}")


WORDS = " ".join(f"w{i}" for i in range(CHUNKS))
SHAPED = {  # (model, its reply of CHUNKS words streamed as its provider streams it)
    "groq/": ("groq/openai/gpt-oss-20b", pr.groq(WORDS)),
    "deepseek/ reasoning": ("deepseek/deepseek-reasoner", pr.deepseek(WORDS, content=WORDS)),
    "gemini-compatible": ("openai/gemini-2.5-flash", pr.gemini_compat(text=WORDS)),
    "xai/": ("xai/grok-3-mini", pr.openai("grok-3-mini", text=WORDS)),
    "mistral/": ("mistral/mistral-small-latest", pr.openai("mistral-small-latest", text=WORDS)),
    "openrouter/": ("openrouter/openai/gpt-4o-mini", pr.openai("openai/gpt-4o-mini", text=WORDS)),
}  # fmt: skip
SHAPED["groq/"][1]["choices"][0]["message"]["content"] = WORDS


def per_event(name: str, body: dict[str, Any]) -> Any:
    """`LiteLLMModel(name).stream` on the fast path, CPU per SSE event of `body`'s stream."""
    events = len(sse.openai_events_of(body)) - 1  # not `[DONE]`

    async def measure(server: ModelServer) -> float:
        model = held(name, server.openai_base)
        started = time.thread_time()
        await model.stream(REQUEST, DeltaRelay("r", 1, time.time, Sink()))
        return (time.thread_time() - started) / events * 1e6

    return measure


async def shaped(server: ModelServer) -> dict[str, tuple[float, float]]:
    """Per `SHAPED` provider: CPU per event of the raw reader and of the fast path."""
    out = {}
    for label, (name, body) in SHAPED.items():
        stream, fast = raw_stream(body), per_event(name, body)
        for _ in range(2):  # the first fills the template, the second checks the direct reading
            server.script(stream)
            await fast(server)
        out[label] = (await median(raw_httpx, server, stream), await median(fast, server, stream))
    return out


async def raw_anthropic(server: ModelServer) -> float:
    said = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    body = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 4096, "messages": said}
    async with httpx.AsyncClient() as client:
        started = time.thread_time()
        async with client.stream("POST", f"{server.url}/v1/messages", json=body) as r:
            deltas = 0
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    deltas += event.get("delta", {}).get("type") == "text_delta"
        return (time.thread_time() - started) / deltas * 1e6


async def agent_stream(server: ModelServer) -> tuple[float, float]:
    agent = Agent(
        LiteLLMModel(MODEL, api_base=server.openai_base, api_key="k"), store=MemoryStore()
    )
    started, wall = time.thread_time(), time.perf_counter()
    first, deltas = None, 0
    async for event in agent.stream("go"):
        if event.kind == "text_delta":
            deltas += 1
            first = first or time.perf_counter()
    assert first is not None
    return (time.thread_time() - started) / deltas * 1e6, (first - wall) * 1e3


async def scripted_step(listen: bool, steps: int = 200) -> float:
    words = " ".join(f"w{i}" for i in range(20))
    agent = Agent(ScriptedModel([words] * steps), store=MemoryStore(),
                  hooks=[Sink()] if listen else None)  # fmt: skip
    started = time.perf_counter()
    result = await agent.run("go")
    for _ in range(steps - 1):
        result = await agent.resume(result.run_id, message="more")
    return (time.perf_counter() - started) / steps * 1e6


class ChunkModel:
    """An in-process streaming model: a reply of `n` text chunks, already made."""

    name = "chunks"

    def __init__(self, n: int) -> None:
        self.pieces = [f"w{i} " for i in range(n)]
        self.response = ModelResponse(message=AssistantMessage(content="".join(self.pieces)))

    async def chunks(self) -> Any:
        for piece in self.pieces:
            yield piece

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.response

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        async for piece in self.chunks():
            await listener.text(piece)
        return self.response


async def chunks_raw(n: int) -> float:
    model, out = ChunkModel(n), []
    started = time.thread_time()
    async for piece in model.chunks():
        out.append(piece)
    assert len(out) == n
    return time.thread_time() - started


async def chunks_streamed(n: int) -> float:
    agent = Agent(ChunkModel(n), store=MemoryStore())
    started, deltas = time.thread_time(), 0
    async for event in agent.stream("go"):
        deltas += event.kind == "text_delta"
    assert deltas == n
    return time.thread_time() - started


async def chunks_hooked(n: int) -> float:
    sink = Sink()
    agent = Agent(ChunkModel(n), store=MemoryStore(), hooks=[sink])
    started = time.thread_time()
    await agent.run("go")
    assert sink.count == n
    return time.thread_time() - started


async def engine_per_chunk() -> dict[str, float]:
    """µs of engine CPU per chunk (slope, 200 → 2,000 chunks) and the fixed cost in ms."""
    small, large = 200, 2000
    samples: dict[tuple[str, int], list[float]] = {}
    for _ in range(REPEATS * 3):  # interleaved, so drifts in machine speed hit all alike
        for name, fn in (("raw", chunks_raw), ("stream", chunks_streamed),
                         ("hook", chunks_hooked)):  # fmt: skip
            for n in (small, large):
                samples.setdefault((name, n), []).append(await fn(n))
    t = {k: statistics.median(v) for k, v in samples.items()}

    def slope(name: str) -> float:
        return (t[name, large] - t[name, small]) / (large - small) * 1e6

    raw = slope("raw")
    return {
        "raw": raw,
        "stream": slope("stream") - raw,
        "hook": slope("hook") - raw,
        "fixed": (t["stream", small] - small * slope("stream") / 1e6) * 1e3,
    }


def engine_report(e: dict[str, float]) -> None:
    def mark(value: float) -> str:
        return "PASS" if value <= 5 else "MISS"

    print("engine CPU per chunk, in-process model (slope 200 -> 2,000 chunks, minus raw):")
    print(f"  chunks consumed raw (floor)  {e['raw']:6.2f} µs/chunk")
    print(f"  agent.stream                 {e['stream']:6.2f} µs/chunk of engine   "
          f"target <= 5 µs {mark(e['stream'])}")  # fmt: skip
    print(f"  delta hook (agent.run)       {e['hook']:6.2f} µs/chunk of engine   "
          f"target <= 5 µs {mark(e['hook'])}")  # fmt: skip
    print(f"  agent.stream fixed cost      {e['fixed']:6.2f} ms per run (creation, store, events)")


async def median(measure: Any, server: ModelServer | None = None, said: Reply | None = None) -> Any:
    runs = []
    for _ in range(REPEATS):
        if server is not None:
            server.script(said or reply())
            runs.append(await measure(server))
        else:
            runs.append(await measure())
    if isinstance(runs[0], tuple):
        return tuple(statistics.median(r[i] for r in runs) for i in range(len(runs[0])))
    return statistics.median(runs)


async def main() -> None:
    engine_report(await engine_per_chunk())
    if "--engine" in sys.argv:
        return
    with ModelServer() as server:
        server.script(reply())
        await litellm_alone(server)  # warm up: imports, connection pools
        raw = await median(raw_httpx, server)
        alone, alone_first = await median(litellm_alone, server)
        through = await median(lambda s: engine_model(s, direct=False), server)
        server.script(reply())
        await engine_model(server)  # the first streamed call of its shape fills the template
        server.script(reply())
        await engine_model(server)  # and the second checks its direct reading
        engine = await median(engine_model, server)
        whole, whole_first = await median(agent_stream, server)
        server.script(reply())
        await GROQ(server)  # its first call fills the template
        server.script(reply())
        await GROQ(server)  # and the second checks its direct reading
        groq = await median(GROQ, server)
        server.script(reply())
        await ANTHROPIC(server)
        server.script(reply())
        await ANTHROPIC(server)  # and the second checks its direct reading
        raw_anth = await median(raw_anthropic, server)
        anthropic = await median(ANTHROPIC, server)
        others = await shaped(server)
    print(f"CPU per chunk ({CHUNKS} chunks, median of {REPEATS}, event-loop thread):")
    print(f"  raw httpx SSE reader      {raw:8.1f} µs   1.00x (floor)")
    print(f"  litellm alone             {alone:8.1f} µs   {alone / raw:5.1f}x")
    print(f"  LiteLLMModel.stream, direct=False (litellm's stream wrapper)"
          f"\n                            {through:8.1f} µs   {through / raw:5.1f}x  "
          f"(engine share {through - alone:+.1f} µs)")  # fmt: skip
    print(f"  LiteLLMModel.stream, fast path (provider_stream.py)"
          f"\n                            {engine:8.1f} µs   {engine / raw:5.2f}x  "
          f"({engine / through:.2f}x of direct=False)")  # fmt: skip
    print(f"  groq/ fast path           {groq:8.1f} µs   {groq / raw:5.2f}x")
    print(f"  raw httpx Anthropic SSE   {raw_anth:8.1f} µs   1.00x (Anthropic's floor)")
    print(f"  anthropic/ fast path      {anthropic:8.1f} µs   {anthropic / raw_anth:5.2f}x")
    for label, (floor, fast) in others.items():
        print(f"  {label:<20} per event {fast:8.1f} µs   {fast / floor:5.2f}x  "
              f"(its raw reader {floor:.1f} µs)")  # fmt: skip
    print(f"  agent.stream (whole run)  {whole:8.1f} µs   {whole / raw:5.1f}x  "
          f"(engine + run share {whole - alone:+.1f} µs)")  # fmt: skip
    print("time to first delta (median):")
    print(f"  litellm alone             {alone_first:8.2f} ms   1.00x")
    print(f"  agent.stream              {whole_first:8.2f} ms   {whole_first / alone_first:5.2f}x")
    plain = await median(lambda: scripted_step(False))
    listened = await median(lambda: scripted_step(True))
    print("step overhead, ScriptedModel, 200 conversation turns of 20 words:")
    print(f"  no listener (complete)    {plain:8.1f} µs   1.00x")
    print(f"  delta hook (streamed)     {listened:8.1f} µs   {listened / plain:5.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
