"""The thin path of an OpenAI-compatible call: litellm's own request and reply functions,
without litellm's per-call machinery around them.

`litellm.acompletion` spends ~5 ms of CPU per call outside the request itself (logging
objects, callbacks, parameter mapping, provider lookup, cost calculation from its model map).
For an `openai/` model with an explicit `api_base` and `api_key` (the direct-payload client's
case, see `openai_client.py`), a call repeats what litellm computed on the first call of the
same shape, so after that first call the thin path does only what changes per call, with the
same litellm functions in the same order:

- messages: `validate_and_fix_openai_messages`, `get_completion_messages`, then the provider
  config's `async_transform_request` (which also sanitizes the tools), only for the messages
  the history gained since its last call (`ThinCall`);
- every other field of the body (model, tool_choice, temperature, extra_body, ...), the
  headers, URL and timeout: as litellm and the SDK produced them on the first call, captured
  where litellm hands them to the OpenAI client and where the SDK builds its request
  (`openai_client.Wire`), in the same order; the body encoded by the SDK's own encoder and
  sent on the same pool, so the bytes on the wire are the same;
- the reply: the SDK's `LegacyAPIResponse.parse`, then `model_dump`,
  `transform_parsed_response_dict` and `convert_to_model_response_object`, as litellm's OpenAI
  handler does; a plain reply (`openai_plain.py`) is read straight from its JSON into what
  that chain and `litellm_reply.read_reply` make of it, and priced at the rates litellm's
  own calculator gave the shape's first reply;
- errors: raised as the SDK raises them (status, timeout, connection), wrapped in litellm's
  `OpenAIError` and mapped by its `exception_type`, as its handler and `acompletion` do;
- the cost: as litellm prices such a call (`litellm_price.py`). A shape's template is kept
  only if that gave the first call's own reply the cost litellm gave it.

It is used only where the skipped work is provably a no-op (`eligible`): no litellm callbacks,
cache or global headers; settings from a known list (no custom prices); text-only messages
without a developer role. Everything else goes through `litellm.acompletion` unchanged, as
does a model built with `direct=False`.

tests/test_openai_thin_path.py compares both paths over real HTTP: path, headers in order and
body bytes of every request, the replies read and the errors raised;
tests/test_openai_thin_pricing.py the costs of priced models' replies,
tests/test_openai_plain_reply.py and tests/test_linear_price.py plain replies and their rates.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, replace
from typing import Any

from loopstate.engine.messages import Message, Origin
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.history_cache import HistoryCache
from loopstate.engine.models.litellm_price import linear_price, priced_alike, set_price
from loopstate.engine.models.openai_client import (
    DirectPayloadClient,
    Wire,
    completion_json,
    parsed,
    send,
)
from loopstate.engine.models.openai_plain import Linear, plain_reply
from loopstate.engine.models.provider_path import eligible
from loopstate.engine.models.wire import provider_messages

_MOVED = frozenset({"messages", "tools"})
# Templates by model name, settings and request shape: shared by equal `LiteLLMModel`s.
_TEMPLATES: dict[tuple[str, str, tuple[bool, str]], Template] = {}


def _plain(messages: list[dict[str, Any]]) -> bool:
    """Text-only messages without a developer role: litellm's message transforms (images,
    files, tool references, developer role) are then each message's own, message by message."""
    return all(
        m.get("role") != "developer" and isinstance(m.get("content"), str | None) for m in messages
    )


@dataclass(frozen=True)
class Template:
    """What litellm handed the SDK for one request shape (minus messages and tools) and the
    request the SDK built of it."""

    fields: tuple[tuple[str, Any], ...]
    timeout: Any
    wire: Wire
    linear: Linear | None = None
    """How litellm prices this shape's plain replies (`openai_plain.py`), if it was found."""

    @property
    def optional(self) -> dict[str, Any]:
        """The optional parameters litellm mapped, as its cost calculation is given them."""
        return {k: v for k, v in self.fields if k not in ("model", "messages")}


def _no_base_model() -> dict[str, Any]:
    """The base model for a synthesized reply's prompt count: litellm >= 1.108 takes one (none
    here: `eligible` admits no `base_model` or `metadata`), older ones take no such argument."""
    from litellm.llms.openai.common_utils import build_output_token_limit_response

    takes = "base_model" in inspect.signature(build_output_token_limit_response).parameters
    return {"base_model": None} if takes else {}


def shape(request: ModelRequest) -> tuple[bool, str]:
    return bool(request.tools), repr(request.tool_choice) if request.tools else ""


def template_of(captured: list[tuple[str, Any]]) -> Template | None:
    """The template of one non-streamed call, sent once (no retry, no second request)."""
    kinds = [kind for kind, _ in captured]
    if sorted(kinds) != ["params", "reading", "request"]:
        return None
    got = dict(captured)
    params = dict(got["params"])
    if params.get("stream"):
        return None
    timeout = params.pop("timeout", None)
    wire = Wire.of(got["request"], got["reading"])
    if wire is None:
        return None
    fields = tuple((k, None if k in _MOVED else v) for k, v in params.items())
    return Template(fields, timeout, wire)


@dataclass(frozen=True)
class _Sent:
    """A history as last sent: its messages, their call ids on the wire, the dicts sent."""

    source: tuple[Message, ...]
    wire_ids: dict[str, str]
    sent: list[dict[str, Any]]


class ThinCall:
    """The thin path for one `LiteLLMModel` (its settings and client are fixed).

    A run's history only grows, so each call transforms only the messages the last call of
    the same history did not have (litellm's message transforms are per message for plain
    messages, see `_plain`); the last histories are kept (`history_cache.py`).
    """

    def __init__(
        self, litellm: Any, client: DirectPayloadClient, name: str, settings: dict[str, Any]
    ) -> None:
        self._litellm = litellm
        self._client = client
        self._settings = settings
        self._api_base = settings["api_base"]
        self._key = (name, repr(sorted(settings.items(), key=lambda item: item[0])))
        self._configs: dict[str, Any] = {}
        self._histories = HistoryCache(_Sent((), {}, []))

    async def complete(
        self, request: ModelRequest, origin: Origin, name: str
    ) -> ModelResponse | Any | None:
        """The call's reply (read, if plain; else litellm's), or None: it must go through
        litellm."""
        template = _TEMPLATES.get((*self._key, shape(request)))
        if template is None or not eligible(self._litellm, self._settings):
            return None
        data = await self._body(dict(template.fields), request, origin)
        if data is None:
            return None
        try:
            raw = await self._send(data, template, origin)
        except Exception as exc:
            raise self._mapped(exc, name) from exc
        if not isinstance(raw, ModelResponse):
            set_price(self._litellm, raw, name, "openai", template.optional)
        return raw

    def remember(self, request: ModelRequest, captured: list[tuple[str, Any]], raw: Any) -> None:
        """Keep what litellm built for `request` as the template of its shape, if its reply
        `raw` is priced here as litellm priced it."""
        template, litellm, name = template_of(captured), self._litellm, self._key[0]
        if template is None or not priced_alike(litellm, raw, name, "openai", template.optional):
            return
        linear = linear_price(litellm, raw, name, "openai", template.optional)
        _TEMPLATES[(*self._key, shape(request))] = replace(template, linear=linear)

    def _config(self, model: str) -> Any:
        config = self._configs.get(model)
        if config is None:
            litellm = self._litellm
            config = litellm.ProviderConfigManager.get_provider_chat_config(
                model=model, provider=litellm.LlmProviders.OPENAI
            )
            self._configs[model] = config
        return config

    async def _body(
        self, fields: dict[str, Any], request: ModelRequest, origin: Origin
    ) -> dict[str, Any] | None:
        from litellm.litellm_core_utils.prompt_templates.common_utils import (
            get_completion_messages,
        )
        from litellm.utils import validate_and_fix_openai_messages, validate_and_fix_openai_tools

        model = fields["model"]
        last = self._histories.last(request.messages)
        wire_ids = dict(last.wire_ids)
        new = provider_messages(request.messages[len(last.source) :], origin, wire_ids)
        if not _plain(new):
            return None
        fixed: list[Any] = validate_and_fix_openai_messages(messages=new)
        fixed = get_completion_messages(
            messages=fixed,
            ensure_alternating_roles=False,
            user_continue_message=None,
            assistant_continue_message=None,
        )
        optional = {k: v for k, v in fields.items() if k not in ("model", "messages")}
        if "tools" in optional:
            tools = [d.to_wire() for d in request.tools]
            optional["tools"] = validate_and_fix_openai_tools(tools=tools)
        data = dict(
            await self._config(model).async_transform_request(
                model=model,
                messages=fixed,
                optional_params=optional,
                litellm_params={"custom_llm_provider": "openai", "api_base": self._api_base},
                headers={},
            )
        )
        data["messages"] = last.sent + data["messages"]
        self._histories.keep(_Sent(request.messages, wire_ids, data["messages"]))
        return data

    async def _send(self, data: dict[str, Any], template: Template, origin: Origin) -> Any:
        """What litellm's `make_openai_chat_completion_request` and its caller do; a plain
        reply read directly (`openai_plain.py`)."""
        import openai
        from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
            convert_to_model_response_object,
        )
        from litellm.llms.openai.common_utils import (
            build_output_token_limit_response,
            is_output_token_limit_error,
        )

        litellm = self._litellm
        timeout = template.timeout
        body = {k: data[k] if k in _MOVED else v for k, v in template.wire.body}
        start = time.time()
        try:
            raw = await send(self._client, template.wire, body)
            body = completion_json(raw)
            plain = self._read_plain(body, raw, template.linear, origin)
            if plain is not None:
                return plain
            headers: Any = dict(raw.headers)
            response = parsed(raw, body)
        except openai.APITimeoutError as exc:
            exc.message += (
                f" - timeout value={timeout}, time taken={round(time.time() - start, 2)} seconds"
            )
            raise
        except openai.BadRequestError as exc:
            if not is_output_token_limit_error(exc):
                raise
            headers, response = build_output_token_limit_response(
                e=exc, data=data, is_async=True, **_no_base_model()
            )
        if not hasattr(response, "model_dump"):
            raise litellm.llms.openai.openai.OpenAIError(
                status_code=500,
                message=f"Empty or invalid response from LLM endpoint. Received: {response!r}. "
                "Check the reverse proxy or model server configuration.",
            )
        dumped = self._config(data["model"]).transform_parsed_response_dict(response.model_dump())
        return convert_to_model_response_object(
            response_object=dumped,
            model_response_object=litellm.ModelResponse(),
            hidden_params={"headers": headers},
            _response_headers=headers,
        )

    def _read_plain(
        self, body: Any, raw: Any, linear: Linear | None, origin: Origin
    ) -> ModelResponse | None:
        """`body` (the JSON of `raw`) read as litellm would read it, if it is a plain chat
        completion whose price litellm's cost map still gives at `linear`'s rates."""
        if linear is None or body is None or not linear.holds(self._litellm.model_cost):
            return None
        return plain_reply(body, raw.http_response.headers, linear, origin)

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
