"""What loopstate's model adapter borrows from litellm or the OpenAI SDK beyond their
documented public API: each name here, with why it is needed and what happens if it goes.

The rule (tests/test_model_contract.py checks it by reading the source): a module of
`engine/models/` uses litellm and the SDK through their public API (`litellm.acompletion`,
`litellm.stream_chunk_builder`, `litellm.get_llm_provider`, the exceptions litellm raises,
the provider config objects' contract: `ProviderConfigManager.get_provider_chat_config`,
`transform_request`, `transform_response`, `get_model_response_iterator`, ...), and anything
else only through this module, so an upgrade's breakage is found in one place. The test fails
if any other module borrows, or this one holds more than 8 names.

A borrowed name that is gone raises here (ImportError, AttributeError): `LiteLLMModel` then
turns its fast path off for the process and calls `litellm.acompletion` (`fast_path_disabled`);
`response_cost` alone reads defensively (an unknown cost).
"""

from __future__ import annotations

from typing import Any


def response_cost(raw: Any) -> float | None:
    """The cost litellm computed for reply `raw` during the call, or None (unknown).

    Borrowed: `_hidden_params["response_cost"]`, where litellm keeps it (a dict, or a
    `HiddenParams` model). litellm's cost-tracking docs read it there; it is the only place
    the cost is computed with the call's whole context (custom prices passed as settings):
    `litellm.completion_cost` afterwards loses that context and raises for unknown models.
    """
    hidden = getattr(raw, "_hidden_params", None)
    if isinstance(hidden, dict):
        cost = hidden.get("response_cost")
    else:
        cost = getattr(hidden, "response_cost", None)
    return float(cost) if isinstance(cost, int | float) else None


def http_handler() -> Any:
    """Litellm's HTTP handler class: what its base handler posts with (`AsyncHTTPHandler`,
    given as `client`, over a transport of ours: litellm's requests are seen as they go out,
    without subclassing it), and whose `create_async_transport` makes the httpx transport
    litellm's own clients send on (aiohttp's unless litellm is told otherwise).

    Borrowed: `litellm.llms.custom_httpx.http_handler.AsyncHTTPHandler`.
    """
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    return AsyncHTTPHandler


_PER_CALL = (
    "callbacks", "success_callback", "failure_callback", "_async_success_callback",
    "_async_failure_callback", "input_callback", "service_callback", "headers", "cache",
    "drop_params", "model_alias_map", "add_function_to_prompt", "openai_system_messages_first",
    "modify_params",
)  # fmt: skip


def no_per_call_work(litellm: Any) -> bool:
    """Whether litellm's globals ask nothing per call that the fast path would skip (no
    callbacks, cache, global headers, aliases, parameter dropping or rewriting).

    Borrowed: `litellm._async_success_callback` and `litellm._async_failure_callback`, where
    litellm keeps the async callbacks it was given (they are set there, not in the public
    lists): read only, a call with any of them goes through `acompletion`.
    """
    return not any(getattr(litellm, name, None) for name in _PER_CALL)


def stream_iterator(config: Any, provider: str, lines: Any) -> Any:
    """The iterator litellm reads a provider's SSE lines with: the config's
    `get_model_response_iterator` (the contract's), or for Anthropic the one its handler uses.

    Borrowed: `litellm.llms.anthropic.chat.handler.ModelResponseIterator`: Anthropic's config
    gives no iterator of its own (its handler builds this one), and its chunks carry the
    thinking blocks, tool uses and usage exactly as litellm's own stream does.
    """
    if provider == "anthropic":
        from litellm.llms.anthropic.chat.handler import ModelResponseIterator

        return ModelResponseIterator(streaming_response=lines, sync_stream=False, json_mode=False)
    return config.get_model_response_iterator(
        streaming_response=lines, sync_stream=False, json_mode=False
    )


def anthropic_turns(config: Any, model: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Anthropic's `messages` and `system` of plain OpenAI-format `messages` (text and tool
    messages, a leading system run): what the config's `transform_request` makes of them.

    Borrowed: `litellm.litellm_core_utils.prompt_templates.factory.anthropic_messages_pt`,
    which that transform calls for the turns (beside the config's `translate_system_message`
    for the system run). The transform around it costs ~2 ms a call in model lookups and
    parameter mapping that a plain history does not use; `ProviderPath` checks each shape's
    first request against litellm's whole transform.
    """
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    rest: Any = messages[lead:]
    turns = anthropic_messages_pt(messages=rest, model=model, llm_provider="anthropic")
    system = config.translate_system_message(messages=messages[:lead])
    return {"messages": turns, "system": system or None}


def output_limit_reply(response: Any, body: dict[str, Any]) -> dict[str, Any] | None:
    """The reply litellm makes of an OpenAI 400 saying the output budget fits no token (an
    empty reply cut at `length`, the prompt's tokens estimated), as JSON; None for any other.

    Borrowed: `litellm.llms.openai.common_utils.is_output_token_limit_error` and
    `build_output_token_limit_response`, which litellm's OpenAI handler applies to such a 400
    (GPT-5 answers a slightly larger budget with that reply, so litellm makes both alike).
    """
    import openai
    from litellm.llms.openai.common_utils import (
        build_output_token_limit_response,
        is_output_token_limit_error,
    )

    try:
        error = response.json()
    except ValueError:
        return None
    exc = openai.BadRequestError(f"Error code: 400 - {error}", response=response, body=error)
    if not is_output_token_limit_error(exc):
        return None
    _, completion = build_output_token_limit_response(
        e=exc, data=body, is_async=True, base_model=None
    )
    dumped: dict[str, Any] = completion.model_dump()  # type: ignore[union-attr]
    return dumped
