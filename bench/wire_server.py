"""An instant OpenAI-compatible and Anthropic server for benchmarks, run as a subprocess.

    python bench/wire_server.py   # prints the port, then serves until stdin closes

`POST /h{N}/v1/chat/completions` answers a tool call (`echo`, a fresh id each time) until the
request carries N-1 tool results, then a text answer: a run against `/h{N}/v1` makes exactly N
model calls. `POST /h{N}/v1/messages` does the same in Anthropic's format (`tool_use` blocks,
counting `tool_result` blocks). `/groq/h{N}/v1`, `/deepseek/h{N}/v1` and `/gemini/h{N}/v1`
answer in those providers' shapes (Groq's gpt-oss `reasoning`, usage timings, `service_tier`,
`usage_breakdown` and `x_groq`; DeepSeek's `reasoning_content`, indexed calls and cache-hit
usage; Gemini's OpenAI-compatible calls without ids, with a thought signature), as recorded
replies have them. The body is never parsed (a byte count), so the server costs the client
nothing and lives in its own process: the client's `time.process_time` is the client's alone.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys

_ids = itertools.count()


# Provider shapes (after recorded replies, as in tests/provider_replies.py), by path prefix.
_MODELS = {
    b"": "gpt-4o-mini-2024-07-18",  # priced in litellm's local map
    b"groq": "openai/gpt-oss-20b",
    b"deepseek": "deepseek-reasoner",
    b"gemini": "gemini-2.5-flash",
}


def _reply(call: bool, shape: bytes = b"") -> bytes:
    message: dict[str, object] = {"role": "assistant", "content": None if call else "Done."}
    if call:
        tool_call: dict[str, object] = {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"x": 1}'},
        }
        if shape == b"gemini":  # no call ids, a thought signature on the call
            tool_call["id"] = ""
            tool_call["extra_content"] = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
        message["tool_calls"] = [tool_call]
    usage: dict[str, object] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    body: dict[str, object] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": _MODELS[shape],
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": usage,
    }
    if shape == b"groq":  # gpt-oss: its reasoning, timings, request id and tier
        message["reasoning"] = "Echo one."
        usage |= {"queue_time": 0.0224, "prompt_time": 0.0013, "completion_time": 0.0081,
                  "total_time": 0.0094}  # fmt: skip
        usage["completion_tokens_details"] = {"reasoning_tokens": 3}
        body |= {"service_tier": "on_demand", "usage_breakdown": None, "system_fingerprint": "fp_7",
                 "x_groq": {"id": "req_01k5ax7kyvfkf8qz4gbm2mpcw9", "seed": 855522485}}  # fmt: skip
    if shape == b"deepseek":
        message["reasoning_content"] = "Echo one."
        for i, tool_call in enumerate(message.get("tool_calls", [])):  # type: ignore[arg-type]
            tool_call["index"] = i
        usage |= {
            "prompt_tokens_details": {"cached_tokens": 8},
            "completion_tokens_details": {"reasoning_tokens": 3},
            "prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 3,
        }  # fmt: skip
    return json.dumps(body).encode()


def _anthropic_reply(call: bool) -> bytes:
    if call:
        content = [{"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": "echo",
                    "input": {"x": 1}}]  # fmt: skip
    else:
        content = [{"type": "text", "text": "Done."}]
    body = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",  # priced in litellm's local map
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }
    return json.dumps(body).encode()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1]
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length)
            parts = path.split(b"/")
            shape = parts.pop(1) if parts[1] in _MODELS else b""
            steps = int(parts[1][1:]) if parts[1].startswith(b"h") else 1
            if path.endswith(b"/messages"):
                payload = _anthropic_reply(body.count(b'"tool_use_id"') < steps - 1)
            else:
                payload = _reply(body.count(b'"tool_call_id"') < steps - 1, shape)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # ends when the parent goes away
    os._exit(0)  # at once: open keep-alive connections need no orderly goodbye


if __name__ == "__main__":
    asyncio.run(main())
