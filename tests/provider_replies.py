"""Provider reply bodies shaped after real recorded responses (field names, nesting, id
formats and usage blocks as the providers send them; values shortened).

Anthropic: the extended-thinking-with-tools example of Anthropic's docs and cookbook
(`thinking` with `signature`, `redacted_thinking` with `data`, then text and `tool_use`;
usage with cache fields). DeepSeek: deepseek-reasoner's thinking mode with tools (docs'
"thinking_mode" guide: `reasoning_content` beside `tool_calls`, `call_00_` ids, cache-hit
usage). Groq: gpt-oss with `reasoning_format=parsed` (`reasoning`, `service_tier`, `x_groq`, the
usage's timings and reasoning tokens, `usage_breakdown`).
OpenAI: chat completions with prompt caching and reasoning (the usage block of OpenAI's prompt
caching guide: `cached_tokens`, `reasoning_tokens`, `audio_tokens`, prediction tokens;
`service_tier`, `system_fingerprint`). Gemini's OpenAI-compatible endpoint: empty call ids and
`extra_content.google.thought_signature` on calls, as seen in Gemini-compat client test suites.
"""

from __future__ import annotations

import json
from typing import Any

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+Pd3bE5IDKsIA=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP=="


def anthropic_thinking_tool_use(*, redacted: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {
            "type": "thinking",
            "thinking": "The user wants a.md. I should read it with read_file.",
            "signature": SIGNATURE,
        }
    ]
    if redacted:
        content.append({"type": "redacted_thinking", "data": REDACTED})
    content += [
        {"type": "text", "text": "I'll read the file."},
        {
            "type": "tool_use",
            "id": "toolu_01CswdEQBMshySk6Y9DFKrfq",
            "name": "read_file",
            "input": {"path": "a.md"},
        },
    ]
    return {
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "cache_creation_input_tokens": 1024,
            "cache_read_input_tokens": 2048,
            "output_tokens": 175,
            "service_tier": "standard",
        },
    }


def anthropic_text(text: str) -> dict[str, Any]:
    return {
        "id": "msg_01Bq9w938a90dw8r",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 600, "output_tokens": 20},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


def _chat(message: dict[str, Any], model: str, usage: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9f1c2d3e",
        "object": "chat.completion",
        "created": 1_761_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": usage,
        **top,
    }


def _function(call_id: str, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
        **extra,
    }


def openai(
    model: str, *calls: dict[str, Any], text: str | None = None, prompt: int = 2006,
    cached: int = 0, reasoning: int = 0, service_tier: str = "default",
) -> dict[str, Any]:  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None,
                               "annotations": []}  # fmt: skip
    if calls:
        message["tool_calls"] = list(calls)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 300 + reasoning,
        "total_tokens": prompt + 300 + reasoning,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
        },
    }  # fmt: skip
    return _chat(message, model, usage, service_tier=service_tier,
                 system_fingerprint="fp_34a54ae93c")  # fmt: skip


def deepseek(reasoning: str, *calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if calls:
        message["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 80,
        "total_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 50},
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 56,
    }
    return _chat(message, "deepseek-reasoner", usage, system_fingerprint="fp_ffc7281d48_prod0820")


def deepseek_call(n: int, path: str) -> dict[str, Any]:
    return _function(f"call_00_{n}xE1AhVqTbzWxkdKzEw3mN", "read_file", {"path": path})


def groq(reasoning: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "reasoning": reasoning}
    if calls:
        message["tool_calls"] = list(calls)
    usage = {
        "queue_time": 0.224163602, "prompt_tokens": 90, "prompt_time": 0.012537141,
        "completion_tokens": 40, "completion_time": 0.081027588, "total_tokens": 130,
        "total_time": 0.093564729, "completion_tokens_details": {"reasoning_tokens": 12},
    }  # fmt: skip
    return _chat(
        message, "openai/gpt-oss-20b", usage, usage_breakdown=None, system_fingerprint="fp_7cc",
        service_tier="on_demand", x_groq={"id": "req_01k5ax7kyvfkf8qz4gbm2mpcw9", "seed": 8555224},
    )  # fmt: skip


def gemini_compat(*calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    usage = {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}
    return _chat(message, "gemini-2.5-flash", usage)


def gemini_call(path: str, *, call_id: str = "", signature: str | None = None) -> dict[str, Any]:
    extra = (
        {} if signature is None else {"extra_content": {"google": {"thought_signature": signature}}}
    )
    return _function(call_id, "read_file", {"path": path}, **extra)


def openai_output_limit() -> dict[str, Any]:
    """The 400 OpenAI returns when `max_tokens` leaves no room for one visible token (GPT-5.x;
    litellm turns it into an empty reply with finish reason `length`)."""
    return {
        "error": {
            "message": "Could not finish the message because max_tokens or model output limit "
            "was reached. Please try again with higher max_tokens.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def openai_rate_limit() -> dict[str, Any]:
    return {
        "error": {
            "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min "
            "(TPM): Limit 30000, Used 29800, Requested 900. Please try again in 7s.",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
