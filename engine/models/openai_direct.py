"""The thin path of an OpenAI-compatible call: litellm's own request and reply functions,
without litellm's per-call machinery around them.

`litellm.acompletion` spends ~5 ms of CPU per call outside the request itself (logging
objects, callbacks, parameter mapping, provider lookup, cost calculation from its model map).
For an `openai/` model with an explicit `api_base` and `api_key` (the direct-payload client's
case, see `openai_client.py`), a call repeats what litellm computed on the first call of the
same shape, so after that first call the thin path does only what changes per call, with the
same litellm functions in the same order:

- messages: `validate_and_fix_openai_messages`, `get_completion_messages`, then the provider
  config's `async_transform_request` (which also sanitizes the tools);
- every other field of the body (model, tool_choice, temperature, extra_body, ...) and the
  timeout: as litellm produced them on the first call, captured where litellm hands them to
  the OpenAI client, in the same key order;
- the HTTP request: the same client (`with_raw_response.create`), so the same bytes and headers;
- the reply: `parse`, `model_dump`, `transform_parsed_response_dict` and
  `convert_to_model_response_object`, as litellm's OpenAI handler does;
- errors: wrapped in litellm's `OpenAIError` and mapped by its `exception_type`, as its
  handler and `acompletion` do.

It is used only where the skipped work is provably a no-op (`eligible`): no litellm callbacks,
cache or global headers; settings from a known list; text-only messages without a developer
role; a model litellm could not price on the first call (an unpriced reply's cost stays
unknown; a priced model keeps litellm's cost calculation). Everything else goes through
`litellm.acompletion` unchanged, as does a model built with `direct=False`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loopstate.engine.models.openai_client import DirectPayloadClient

# Settings whose litellm mapping is a fixed function of the setting (captured once).
_SETTINGS = frozenset(
    {
        "api_base", "api_key", "organization", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "seed", "stop", "timeout", "extra_headers", "extra_body",
        "presence_penalty", "frequency_penalty", "parallel_tool_calls", "user",
        "reasoning_effort", "response_format", "logit_bias", "num_retries",
    }
)  # fmt: skip
# litellm globals that add per-call work the thin path does not repeat.
_EMPTY_GLOBALS = (
    "callbacks", "success_callback", "failure_callback", "_async_success_callback",
    "_async_failure_callback", "input_callback", "service_callback", "headers", "cache",
    "drop_params", "model_alias_map", "add_function_to_prompt",
)  # fmt: skip
_MOVED = frozenset({"messages", "tools"})


def eligible(litellm: Any, settings: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
    if not settings.keys() <= _SETTINGS or settings.get("num_retries", 0) != 0:
        return False
    if any(getattr(litellm, name, None) for name in _EMPTY_GLOBALS):
        return False
    return all(
        m.get("role") != "developer" and isinstance(m.get("content"), str | None) for m in messages
    )


@dataclass(frozen=True)
class Template:
    """The body litellm built for one request shape, minus messages and tools."""

    fields: tuple[tuple[str, Any], ...]
    timeout: Any


def shape(arguments: dict[str, Any]) -> tuple[bool, str]:
    return "tools" in arguments, repr(arguments.get("tool_choice"))


def template_of(captured: list[dict[str, Any]]) -> Template | None:
    if len(captured) != 1 or captured[0].get("stream"):
        return None
    params = dict(captured[0])
    timeout = params.pop("timeout", None)
    return Template(tuple((k, None if k in _MOVED else v) for k, v in params.items()), timeout)


class ThinCall:
    """The thin path for one `LiteLLMModel` (its settings and client are fixed)."""

    def __init__(self, litellm: Any, client: DirectPayloadClient, api_base: str) -> None:
        self._litellm = litellm
        self._client = client
        self._api_base = api_base
        self.templates: dict[tuple[bool, str], Template] = {}
        self._configs: dict[str, Any] = {}

    async def complete(self, template: Template, arguments: dict[str, Any], name: str) -> Any:
        fields = dict(template.fields)
        data = await self._body(fields, arguments)
        try:
            return await self._send(data, template.timeout)
        except Exception as exc:
            raise self._mapped(exc, name) from exc

    def _config(self, model: str) -> Any:
        config = self._configs.get(model)
        if config is None:
            litellm = self._litellm
            config = litellm.ProviderConfigManager.get_provider_chat_config(
                model=model, provider=litellm.LlmProviders.OPENAI
            )
            self._configs[model] = config
        return config

    async def _body(self, fields: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
        from litellm.litellm_core_utils.prompt_templates.common_utils import (
            get_completion_messages,
        )
        from litellm.utils import validate_and_fix_openai_messages, validate_and_fix_openai_tools

        model = fields["model"]
        messages = validate_and_fix_openai_messages(messages=arguments["messages"])
        messages = get_completion_messages(
            messages=messages,
            ensure_alternating_roles=False,
            user_continue_message=None,
            assistant_continue_message=None,
        )
        optional = {k: v for k, v in fields.items() if k not in ("model", "messages")}
        if "tools" in optional:
            optional["tools"] = validate_and_fix_openai_tools(tools=arguments["tools"])
        return dict(
            await self._config(model).async_transform_request(
                model=model,
                messages=messages,
                optional_params=optional,
                litellm_params={"custom_llm_provider": "openai", "api_base": self._api_base},
                headers={},
            )
        )

    async def _send(self, data: dict[str, Any], timeout: Any) -> Any:  # noqa: ASYNC109
        """What litellm's `make_openai_chat_completion_request` and its caller do."""
        import openai
        from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
            convert_to_model_response_object,
        )
        from litellm.llms.openai.common_utils import (
            build_output_token_limit_response,
            is_output_token_limit_error,
        )

        litellm = self._litellm
        create = self._client.chat.completions.with_raw_response.create
        start = time.time()
        try:
            raw = await create(**data, timeout=timeout)
            headers: Any = dict(raw.headers)
            response = raw.parse()
        except openai.APITimeoutError as exc:
            exc.message += (
                f" - timeout value={timeout}, time taken={round(time.time() - start, 2)} seconds"
            )
            raise
        except openai.BadRequestError as exc:
            if not is_output_token_limit_error(exc):
                raise
            headers, response = build_output_token_limit_response(e=exc, data=data, is_async=True)
        if not hasattr(response, "model_dump"):
            raise litellm.llms.openai.openai.OpenAIError(
                status_code=500,
                message=f"Empty or invalid response from LLM endpoint. Received: {response!r}. "
                "Check the reverse proxy or model server configuration.",
            )
        parsed = self._config(data["model"]).transform_parsed_response_dict(response.model_dump())
        return convert_to_model_response_object(
            response_object=parsed,
            model_response_object=litellm.ModelResponse(),
            hidden_params={"headers": headers},
            _response_headers=headers,
        )

    def _mapped(self, exc: Exception, name: str) -> Exception:
        """What `litellm.acompletion` raises for `exc`: its handler's `OpenAIError`, mapped."""
        litellm = self._litellm
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type

        if not isinstance(exc, litellm.llms.openai.openai.OpenAIError):
            response = getattr(exc, "response", None)
            headers = getattr(exc, "headers", None)
            if headers is None and response:
                headers = getattr(response, "headers", None)
            exc = litellm.llms.openai.openai.OpenAIError(
                status_code=getattr(exc, "status_code", 500),
                message=getattr(exc, "message", str(exc)),
                headers=headers,
                body=getattr(exc, "body", None),
            )
        try:
            return exception_type(  # type: ignore[no-untyped-call,no-any-return]
                model=name, custom_llm_provider="openai", original_exception=exc
            )
        except Exception as mapped:  # exception_type raises the mapped exception
            return mapped
