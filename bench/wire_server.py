"""An instant OpenAI-compatible and Anthropic server for benchmarks, run as a subprocess.

    python bench/wire_server.py   # prints the port, then serves until stdin closes

`POST /h{N}/v1/chat/completions` answers a tool call (`echo`, a fresh id each time) until the
request carries N-1 tool results, then a text answer: a run against `/h{N}/v1` makes exactly N
model calls. `POST /h{N}/v1/messages` does the same in Anthropic's format (`tool_use` blocks,
counting `tool_result` blocks). The body is never parsed (a byte count), so the server costs
the client nothing and lives in its own process: the client's `time.process_time` is the
client's alone.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys

_ids = itertools.count()


def _reply(call: bool) -> bytes:
    message: dict[str, object] = {"role": "assistant", "content": None if call else "Done."}
    if call:
        message["tool_calls"] = [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"x": 1}'},
            }
        ]
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini-2024-07-18",  # priced in litellm's local map
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }
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
            steps = int(path.split(b"/")[1][1:]) if path.startswith(b"/h") else 1
            if path.endswith(b"/messages"):
                payload = _anthropic_reply(body.count(b'"tool_use_id"') < steps - 1)
            else:
                payload = _reply(body.count(b'"tool_call_id"') < steps - 1)
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
