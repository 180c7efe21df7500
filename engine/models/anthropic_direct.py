"""The thin path of an Anthropic call: litellm's own Anthropic request and reply functions,
without litellm's per-call machinery around them.

`litellm.acompletion` spends ~5 ms of CPU on an Anthropic call outside the request itself,
and more as the history grows (it copies every message twice, rewrites every tool call id
for Gemini's thought signatures, and logs the whole request after the call). For an
`anthropic/` model with an explicit `api_base` and `api_key`, the first call of a request
shape goes through litellm, posting with litellm's own HTTP handler (`anthropic_client.py`),
which records what was posted: the URL, headers, timeout, and the body's fields in order.
Later calls of the same shape repeat only what depends on the history, with litellm's own
functions in the order its `completion`, `acompletion` and `AnthropicConfig.transform_request`
call them:

- the messages: `validate_and_fix_openai_messages`, `get_completion_messages`, the leading
  system run split off (`split_leading_system_run`, `translate_system_message`), then
  `anthropic_messages_pt` and `strip_advisor_blocks_from_messages`, only for what the history
  gained since its last call (`anthropic_history.py`); they replace the `messages` and
  `system` fields of the recorded body, every other field staying as litellm made it (tools,
  tool_choice, max_tokens, thinking, temperature, ...);
- the post: with the same handler, URL, headers and timeout (the same bytes on the wire);
- the reply: `AnthropicConfig.transform_response` (thinking blocks and their signatures,
  redacted thinking, tool uses, usage with cache tokens, as litellm reads them); a plain
  reply (text and tool uses, nothing cached, `anthropic_plain.py`) read straight from its
  JSON into what that and `litellm_reply.read_reply` make of it;
- errors: wrapped in `AnthropicError` as litellm's handler wraps them, then mapped by
  `exception_type` as `acompletion` maps them (429 with retry-after, 529, 4xx, timeouts);
- the cost: as litellm prices the call (`litellm_price.py`), checked on the first call; a
  reply of text and tool uses with nothing cached, at the standard tier, is priced at the
  per-token rates litellm's calculator gave the first (`openai_plain.Linear`).

It is used only where what litellm does besides is provably nothing for the request
(`_admits`): `openai_direct.eligible`'s settings and globals (no callbacks, cache, custom
prices) and no `modify_params`, no `response_format`; tool names Anthropic takes as they
are; text-only messages without cache control or Gemini thought signatures in call ids, and
no system message after the leading ones; tools given whenever the history has tool calls
(litellm would add a placeholder tool); no advisor tool. Streaming
stays on litellm. tests/test_anthropic_thin_path.py compares both paths over real HTTP:
the requests byte for byte, the replies, costs and errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.anthropic_client import Posted, RecordingHandler
from loopstate.engine.models.anthropic_history import Histories
from loopstate.engine.models.anthropic_plain import counts, json_body, plain_reply
from loopstate.engine.models.litellm_price import linear_price, priced_alike, set_price
from loopstate.engine.models.openai_plain import Linear
from loopstate.engine.models.provider_path import eligible

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "thinking_blocks", "reasoning_content"}
)
_FROM_HISTORY = frozenset({"messages", "system"})
# Templates by model name, settings and request shape: shared by equal `LiteLLMModel`s.
_TEMPLATES: dict[tuple[str, str, tuple[bool, str, bool]], Template] = {}


@dataclass(frozen=True)
class Template:
    """What litellm posted for one request shape, and its model name on the wire."""

    url: str
    headers: dict[str, str]
    body: tuple[tuple[str, Any], ...]
    timeout: Any
    linear: Linear | None = None
    """How litellm prices this shape's plain replies (`openai_plain.Linear`), if found."""

    @property
    def model(self) -> str:
        return str(dict(self.body)["model"])

    @property
    def optional(self) -> dict[str, Any]:
        """The optional parameters litellm mapped, as its cost calculation is given them."""
        return {k: v for k, v in self.body if k not in ("model", "messages")}


class _NoLogging:
    """What `transform_response` logs to (litellm's logging object logs the reply there)."""

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        pass


def _shape(request: ModelRequest) -> tuple[bool, str, bool]:
    has_system = bool(request.messages) and request.messages[0].role == "system"
    return bool(request.tools), repr(request.tool_choice) if request.tools else "", has_system


def _plain(messages: list[dict[str, Any]], tools: bool) -> bool:
    """Messages litellm's transforms treat one by one, with nothing added elsewhere."""
    from litellm.litellm_core_utils.prompt_templates.factory import THOUGHT_SIGNATURE_SEPARATOR

    for m in messages:
        if not m.keys() <= _MESSAGE_KEYS or not isinstance(m.get("content"), str | None):
            return False
        calls = m.get("tool_calls") or ()
        if calls and not tools:
            return False  # litellm would add a placeholder tool
        ids = [c["id"] for c in calls] + [m.get("tool_call_id") or ""]
        if any(THOUGHT_SIGNATURE_SEPARATOR in i for i in ids):
            return False
    return True


class ThinAnthropic:
    """The thin path for one `LiteLLMModel` of the `anthropic` provider."""

    def __init__(
        self, litellm: Any, handler: RecordingHandler, name: str, settings: dict[str, Any]
    ) -> None:
        self._litellm = litellm
        self._handler = handler
        self._settings = settings
        self._key = (name, repr(sorted(settings.items(), key=lambda item: item[0])))
        self._config: Any = None
        self._histories: Histories | None = None

    def _admits(self, request: ModelRequest) -> bool:
        settings = self._settings
        return (
            eligible(self._litellm, settings)
            and not self._litellm.modify_params
            and "response_format" not in settings
            and all(_TOOL_NAME.match(t.name) for t in request.tools)
        )

    def remember(self, request: ModelRequest, captured: list[tuple[str, Any]], raw: Any) -> None:
        """Keep what litellm posted for `request` as the template of its shape, if its reply
        `raw` is priced here as litellm priced it."""
        posted = [value for kind, value in captured if kind == "posted"]
        if len(posted) != 1 or len(captured) != 1 or not self._admits(request):
            return
        sent: Posted = posted[0]
        template = Template(sent.url, sent.headers, tuple(sent.body.items()), sent.timeout)
        litellm, name, optional = self._litellm, self._key[0], template.optional
        if priced_alike(litellm, raw, name, "anthropic", optional):
            linear = linear_price(litellm, raw, name, "anthropic", optional)
            _TEMPLATES[(*self._key, _shape(request))] = replace(template, linear=linear)

    async def complete(
        self, request: ModelRequest, origin: Origin, name: str
    ) -> ModelResponse | Any | None:
        """The call's reply (read, if plain; else litellm's), or None: it must go through
        litellm."""
        template = _TEMPLATES.get((*self._key, _shape(request)))
        if template is None or not self._admits(request):
            return None
        made = self._body(template, request, origin)
        if made is None:
            return None
        body, messages = made
        raw, tokens = await self._send(template, body, messages, name, origin)
        if isinstance(raw, ModelResponse):
            return raw  # a plain reply, read and priced here
        linear = None if template.linear is None or tokens is None else (template.linear, tokens)
        set_price(self._litellm, raw, name, "anthropic", template.optional, linear)
        return raw

    def _anthropic(self) -> Any:
        if self._config is None:
            litellm = self._litellm
            self._config = litellm.ProviderConfigManager.get_provider_chat_config(
                model=self._key[0], provider=litellm.LlmProviders.ANTHROPIC
            )
        return self._config

    def _body(
        self, template: Template, request: ModelRequest, origin: Origin
    ) -> tuple[dict[str, Any], list[Any]] | None:
        """The recorded body with this history's `messages` and `system` (`anthropic_history`)
        and the messages litellm's transform was given; None if the history does not fit."""
        from litellm.types.llms.anthropic import ANTHROPIC_ADVISOR_TOOL_TYPE

        fields = dict(template.body)
        if any(t.get("type") == ANTHROPIC_ADVISOR_TOOL_TYPE for t in fields.get("tools") or ()):
            return None  # litellm keeps advisor blocks then; the history strips them
        if self._histories is None:
            self._histories = Histories(self._anthropic(), template.model)
        tools = bool(request.tools)
        made = self._histories.request_messages(
            request.messages, origin, lambda new: _plain(new, tools)
        )
        if made is None:
            return None
        system, turns, messages = made
        if bool(system) != ("system" in fields):
            return None
        new = {"messages": turns, "system": system}
        return {k: new[k] if k in _FROM_HISTORY else v for k, v in template.body}, messages

    async def _send(
        self, template: Template, body: dict[str, Any], messages: list[Any], name: str,
        origin: Origin,
    ) -> tuple[Any, tuple[int, int] | None]:  # fmt: skip
        """What litellm's Anthropic handler and `acompletion` do with the body (a plain reply
        read directly, `anthropic_plain.py`), and the tokens of a reply litellm prices by
        them alone."""
        litellm = self._litellm
        try:
            response = await self._handler.post(
                template.url, headers=dict(template.headers), json=body, timeout=template.timeout
            )
        except Exception as exc:
            raise _mapped(litellm, _handler_error(exc), name) from exc
        reply_body = json_body(response)
        if template.linear is not None:
            plain = plain_reply(
                reply_body, response.headers, template.linear, origin, litellm.model_cost
            )
            if plain is not None:
                return plain, None
        reply = litellm.ModelResponse()
        reply._hidden_params.update(custom_llm_provider="anthropic", region_name=None)
        try:
            read = self._anthropic().transform_response(
                model=template.model, raw_response=response, model_response=reply,
                logging_obj=_NoLogging(), api_key=self._settings["api_key"], request_data=body,
                messages=messages, optional_params={}, litellm_params={}, encoding=None,
                json_mode=False,
            )  # fmt: skip
        except Exception as exc:
            raise _mapped(litellm, exc, name) from exc
        return read, counts(reply_body, response.headers)


def _handler_error(exc: Exception) -> Exception:
    """The `AnthropicError` litellm's handler raises for a failed post."""
    from litellm.llms.anthropic.common_utils import AnthropicError

    status = getattr(exc, "status_code", 500)
    headers = getattr(exc, "headers", None)
    text = getattr(exc, "text", str(exc))
    response = getattr(exc, "response", None)
    if headers is None and response:
        headers = getattr(response, "headers", None)
    if response and hasattr(response, "text"):
        text = getattr(response, "text", text)
    return AnthropicError(message=text, status_code=status, headers=headers)


def _mapped(litellm: Any, exc: Exception, name: str) -> Exception:
    """What `litellm.acompletion` raises for `exc`, mapped by its `exception_type`."""
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type

    try:
        return exception_type(  # type: ignore[no-untyped-call,no-any-return]
            model=name, custom_llm_provider="anthropic", original_exception=exc,
            completion_kwargs={}, extra_kwargs={},
        )  # fmt: skip
    except Exception as mapped:  # exception_type raises the mapped exception
        return mapped
