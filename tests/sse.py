"""Server-sent event streams in the OpenAI and Anthropic formats, for `model_server`.

Shaped after the providers' real streams (OpenAI chat completion chunks: a role chunk, content
pieces, each tool call's id and name with empty arguments then argument fragments, a finish
chunk, the usage chunk with `choices: []` when `include_usage` was asked, `[DONE]`; Anthropic:
`message_start` with input tokens, a `ping`, one content block per text and tool use with
`text_delta`/`input_json_delta` pieces, `message_delta` with the stop reason and output
tokens, `message_stop`).
"""

from __future__ import annotations

import json
import re
from typing import Any

_PIECES = re.compile(r"\s*\S+|\s+")


def pieces(text: str) -> list[str]:
    return _PIECES.findall(text)


def halves(text: str) -> list[str]:
    """A JSON text in a few fragments, cut inside strings as providers do."""
    step = max(1, len(text) // 3)
    return [text[i : i + step] for i in range(0, len(text), step)]


def openai_events(
    text: str | None,
    calls: list[tuple[str, str, str]],
    usage: tuple[int, int],
    model: str,
    include_usage: bool,
    *,
    finish: bool = True,
) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": None,
        }

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": p}) for p in pieces(text or "")]
    for index, (cid, name, arguments) in enumerate(calls):
        first = {"index": index, "id": cid, "type": "function",
                 "function": {"name": name, "arguments": ""}}  # fmt: skip
        out.append(chunk({"tool_calls": [first]}))
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in halves(arguments)
        ]
    if finish:
        out.append(chunk({}, "tool_calls" if calls else "stop"))
        if include_usage:
            prompt, completion = usage
            last = chunk({})
            last["choices"] = []
            last["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}  # fmt: skip
            out.append(last)
    return [f"data: {json.dumps(c)}\n\n".encode() for c in out] + [b"data: [DONE]\n\n"]


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index,
                                   "content_block": block}  # fmt: skip


def _block_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def anthropic_events(
    text: str | None,
    calls: list[tuple[str, str, str]],
    usage: tuple[int, int],
    model: str,
    *,
    finish: bool = True,
) -> list[bytes]:
    prompt, completion = usage
    message = {"id": "msg_stream", "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": prompt, "output_tokens": 1}}  # fmt: skip
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("ping", {"type": "ping"}),
    ]
    blocks = 0
    if text:
        out.append(_block_start(0, {"type": "text", "text": ""}))
        out += [_block_delta(0, {"type": "text_delta", "text": p}) for p in pieces(text)]
        out.append(_block_stop(0))
        blocks = 1
    for index, (cid, name, arguments) in enumerate(calls, blocks):
        out.append(_block_start(index, {"type": "tool_use", "id": cid, "name": name, "input": {}}))
        out += [
            _block_delta(index, {"type": "input_json_delta", "partial_json": part})
            for part in ["", *halves(arguments)]
        ]
        out.append(_block_stop(index))
    if finish:
        stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
        out.append(("message_delta", {"type": "message_delta", "delta": stop,
                                      "usage": {"output_tokens": completion}}))  # fmt: skip
        out.append(("message_stop", {"type": "message_stop"}))
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in out]


def openai_events_of(body: dict[str, Any]) -> list[bytes]:
    """A recorded OpenAI-format reply body streamed as its provider streams it: a role chunk,
    the reasoning then the text in pieces, each tool call's id, name and own fields (an empty
    or repeated id as recorded) then its argument fragments, the finish chunk, the usage
    chunk (`choices: []`), `[DONE]`."""
    choice = body["choices"][0]
    message = choice["message"]
    top = {k: v for k, v in body.items() if k not in ("choices", "usage", "object")}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**top, "object": "chat.completion.chunk", "usage": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish_reason}]}  # fmt: skip

    out = [chunk({"role": "assistant", "content": ""})]
    for name in ("reasoning_content", "reasoning"):
        out += [chunk({name: p}) for p in pieces(message.get(name) or "")]
    out += [chunk({"content": p}) for p in pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or ()):
        fields = {k: v for k, v in call.items() if k not in ("index", "function")}
        function = call["function"]
        first = {"index": index, **fields, "function": {"name": function["name"], "arguments": ""}}
        out.append(chunk({"tool_calls": [first]}))
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in halves(function["arguments"])
        ]
    out.append(chunk({}, choice["finish_reason"]))
    last = chunk({})
    last["choices"], last["usage"] = [], body["usage"]
    out.append(last)
    return [f"data: {json.dumps(c)}\n\n".encode() for c in out] + [b"data: [DONE]\n\n"]


def anthropic_events_of(body: dict[str, Any], *, finish: bool = True) -> list[bytes]:
    """A recorded Anthropic reply body streamed as Anthropic streams it: `message_start` (the
    usage's input and cache counts), each block opened, its deltas (thinking in pieces then
    its `signature_delta`; a redacted block whole at its start; text in pieces; a tool use's
    input as JSON fragments), closed; `message_delta` (stop reason, output tokens) and
    `message_stop` when it `finish`es."""
    usage = body["usage"]
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"} | {"output_tokens": 1}
    message = {**body, "content": [], "stop_reason": None, "usage": start_usage}
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        if kind == "thinking":
            out.append(_block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
            out += [_block_delta(index, {"type": "thinking_delta", "thinking": p})
                    for p in pieces(block["thinking"])]  # fmt: skip
            sig = {"type": "signature_delta", "signature": block["signature"]}
            out.append(_block_delta(index, sig))
        elif kind == "text":
            out.append(_block_start(index, {"type": "text", "text": ""}))
            out += [_block_delta(index, {"type": "text_delta", "text": p})
                    for p in pieces(block["text"])]  # fmt: skip
        elif kind == "tool_use":
            out.append(_block_start(index, {**block, "input": {}}))
            out += [_block_delta(index, {"type": "input_json_delta", "partial_json": part})
                    for part in ["", *halves(json.dumps(block["input"]))]]  # fmt: skip
        else:  # redacted thinking: whole at its start
            out.append(_block_start(index, block))
        out.append(_block_stop(index))
    if finish:
        stop = {"stop_reason": body["stop_reason"], "stop_sequence": None}
        counted = {"output_tokens": usage["output_tokens"]}
        out.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": counted}))
        out.append(("message_stop", {"type": "message_stop"}))
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in out]
