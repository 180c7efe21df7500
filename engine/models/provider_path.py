"""The one fast path, on litellm's provider-config contract, for every provider in `PROVIDERS`
(OpenAI, Anthropic, and the OpenAI-compatible ones litellm's base HTTP handler drives).

litellm drives a provider with its config object: headers, URL, `transform_request`, then
`transform_response` or a stream iterator; `acompletion` adds ~5 ms of CPU a call around that
and transforms the whole history each call. Here the model's own HTTP client (a `Recorder`
transport, handed to `acompletion` as its `client`) records litellm's first request of a
shape; later calls resend it with only the history's fields changed (`provider_history.py`),
encoded as litellm encoded them: the same bytes. Replies are read by `transform_response`
and priced by `litellm.completion_cost` (a shape whose cost differs from litellm's own is not
kept), plain ones straight from their JSON at the model's per-token rates (`provider_plain.py`,
once checked on its first plain reply), streams by `provider_stream.py`; an error status is
a `ModelError` of the status, the error body and retry-after. Anything else (a changed
contract) goes back to `LiteLLMModel`, which turns the fast path off. `SIGNED` providers stay
on `acompletion`, as does any model without an explicit `api_key` or with `direct=False`.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from contextlib import AbstractContextManager
from types import SimpleNamespace
from typing import Any

import httpx

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.models.litellm_contract import (
    http_handler,
    no_per_call_work,
    output_limit_reply,
    response_cost,
)
from loopstate.engine.models.litellm_errors import model_error, status_error
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.provider_history import Histories
from loopstate.engine.models.provider_http import (
    Recorder,
    Template,
    encoded,
    encoder,
    recording,
    send,
)
from loopstate.engine.models.provider_plain import (
    COST_HEADER,
    UNPRICED,
    Rates,
    find_rates,
    form,
    plain_reply,
)
from loopstate.engine.streaming import DeltaListener

PROVIDERS = frozenset({"openai", "anthropic", "groq", "deepseek", "xai", "mistral", "openrouter"})
SIGNED = frozenset({"bedrock", "vertex_ai", "vertex_ai_beta", "sagemaker", "azure", "azure_ai"})
"""Stay on `acompletion`: their requests are signed or their credentials resolved per call."""

# Settings whose litellm mapping is a fixed function of the setting (captured once).
_SETTINGS = frozenset(
    {
        "api_base", "api_key", "organization", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "seed", "stop", "timeout", "extra_headers", "extra_body",
        "presence_penalty", "frequency_penalty", "parallel_tool_calls", "user",
        "reasoning_effort", "response_format", "logit_bias", "num_retries", "thinking",
    }
)  # fmt: skip
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # every provider takes it as it is


def eligible(litellm: Any, settings: dict[str, Any]) -> bool:
    """The settings and litellm's globals leave nothing per call the fast path skips."""
    if not settings.keys() <= _SETTINGS or settings.get("num_retries", 0) != 0:
        return False
    return no_per_call_work(litellm)


_NO_LOGGING = SimpleNamespace(model_call_details={}, post_call=lambda *a, **k: None)
"""What `transform_response` logs to (litellm's logging object): kept nowhere."""


def _shape(request: ModelRequest, streamed: bool) -> tuple[bool, str, bool]:
    return bool(request.tools), request.tool_choice if request.tools else "", streamed


class ProviderPath:
    """The fast path of one `LiteLLMModel` of a provider in `PROVIDERS`."""

    def __init__(self, litellm: Any, origin: Origin, settings: dict[str, Any]) -> None:
        self.litellm = litellm
        self._origin = origin
        self.loop = asyncio.get_running_loop()
        """An HTTP client's pool belongs to the event loop that opened it."""
        self._name = origin.model
        self.provider = origin.provider
        self.settings = settings
        self.handler: Any
        """Handed to `acompletion` as its `client`: litellm's handler over our transport (its
        client keeps no cookies); for `openai/`, an `AsyncOpenAI` over a client like the one
        litellm builds for it (cookies kept, redirects followed)."""
        self.client: httpx.AsyncClient
        self.transport = Recorder()
        if self.provider != "openai":
            self.handler = http_handler()(transport=self.transport)
            self.client = self.handler.client
        else:
            from openai import AsyncOpenAI

            self.client = httpx.AsyncClient(transport=self.transport, follow_redirects=True)
            # The SDK >= 3 types its client as its `httpx2` fork's; it sends with the one given.
            given: Any = self.client
            self.handler = AsyncOpenAI(
                api_key=settings["api_key"], base_url=settings.get("api_base"),
                organization=settings.get("organization"), http_client=given,
                max_retries=0,  # litellm sets the call's own retries on the client it is given
            )  # fmt: skip
        self._config: Any = None
        self._templates: dict[tuple[bool, str, bool], Template] = {}
        self._histories: Histories | None = None
        self._compact: bool | None = None
        self.learned: dict[tuple[Any, ...], Rates | None] = {}
        """Per reply model and tier: its plain replies' rates (None: read by litellm)."""

    def usable(self) -> bool:
        """Its client is open, on the running event loop (a pool belongs to the loop that
        opened it)."""
        return self.loop is asyncio.get_running_loop() and not self.client.is_closed

    def capturing(self) -> AbstractContextManager[list[httpx.Request]]:
        return recording()

    def _admits(self, request: ModelRequest) -> bool:
        return eligible(self.litellm, self.settings) and all(
            _TOOL_NAME.match(t.name) for t in request.tools
        )

    def remember(self, request: ModelRequest, captured: list[Any], raw: Any) -> None:
        """Keep litellm's request for `request` (`captured`) as its shape's template: of a
        streamed call (`raw` None), or of a plain one whose reply (`raw`, litellm's) is
        priced here as litellm priced it."""
        streamed = raw is None
        if len(captured) != 1 or not self._admits(request):
            return
        if not streamed and self.cost(raw) != response_cost(raw):
            return
        sent: httpx.Request = captured[0]
        body = json.loads(sent.content)
        if not isinstance(body, dict) or bool(body.get("stream")) != streamed:
            return
        compact = encoded(body, compact=True) == sent.content
        if not compact and encoded(body, compact=False) != sent.content:
            return  # sent in an encoding of its own
        history = self._history()
        if self._compact is None:  # the turns kept are encoded as the first shape's body is
            self._compact, history.encode = compact, encoder(compact)
        if history.remember(request.messages, self._origin, body):
            template = Template(sent, body, request.tools, compact)
            self._templates[_shape(request, streamed)] = template

    def _history(self) -> Histories:
        if self._histories is None:
            base = self.settings.get("api_base")
            given = {"custom_llm_provider": self.provider, "api_base": base}
            self._histories = Histories(self.contract(), self.provider == "anthropic", given)
        return self._histories

    def _request(
        self, request: ModelRequest, streamed: bool
    ) -> tuple[httpx.Request, dict[str, Any]] | None:
        """The call's request and its body, or None: it must go through litellm."""
        template = self._templates.get(_shape(request, streamed))
        if template is None or template.tools != request.tools:
            return None
        if not eligible(self.litellm, self.settings):  # its tools were, when it was kept
            return None
        self.contract()  # a changed contract is found before sending, not after
        made = self._history().fields(request.messages, self._origin, template.body)
        if made is None or any((v is None) != (k not in template.body) for k, v in made[0].items()):
            return None
        fields, coded = made
        if template.compact != self._compact:  # kept in another shape's encoding
            coded = ()
        return template.build(self.client, fields, coded)

    async def complete(self, request: ModelRequest) -> ModelResponse | None:
        """The call's reply, or None: it must go through litellm."""
        made = self._request(request, streamed=False)
        if made is None:
            return None
        sending, body = made
        response = await self.send(sending, stream=False, body=body)
        return self._read(response, body, self._origin)

    async def stream(
        self, request: ModelRequest, listener: DeltaListener, stall_s: float
    ) -> ModelResponse | None:
        """The streamed reply, or None: it must go through litellm."""
        made = self._request(request, streamed=True)
        if made is None:
            return None
        from loopstate.engine.models.provider_stream import stream_reply

        return await stream_reply(self, *made, self._origin, listener, stall_s)

    async def send(
        self, request: httpx.Request, *, stream: bool, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        """`request` sent; an error status, a timeout or a failed connection a `ModelError`
        (but the 400 litellm makes an empty reply of, for a call's `body`)."""
        try:
            response = await send(self.client, self.transport, request, stream=stream)
        except httpx.TransportError as exc:  # a timeout, a failed connection
            raise model_error(exc, self._name) from exc
        if response.status_code >= 400:
            if stream:
                await response.aread()
                await response.aclose()
            if response.status_code == 400 and self.provider == "openai" and body is not None:
                made = output_limit_reply(response, body)
                if made is not None:
                    made_by = {"loopstate_made": True}  # litellm's own reply: its id is random
                    return httpx.Response(200, json=made, extensions=made_by)
            raise status_error(self._name, response)
        return response

    def _read(
        self, response: httpx.Response, body: dict[str, Any], origin: Origin
    ) -> ModelResponse:
        try:
            reply = json.loads(response.content)
        except ValueError:
            reply = None
        anthropic = self.provider == "anthropic"
        if not isinstance(reply, dict) or not isinstance(
            reply.get("content" if anthropic else "choices"), list
        ):
            raise ModelError(  # a proxy's page, or JSON that is no completion
                f"model {self._name} failed: the reply is no completion: {response.text[:200]!r}",
                error_type="bad_response",
            )
        reply_id = None if response.extensions.get("loopstate_made") else reply.get("id")
        key = (reply.get("model"), reply.get("service_tier"), form(reply))
        rates = None if COST_HEADER in response.headers else self.rates(key)
        if rates is not None:
            made = plain_reply(reply, rates, origin, anthropic, reply_id)
            if made is not None:
                return made
        optional = {k: v for k, v in body.items() if k not in ("model", "messages")}
        raw = self.contract().transform_response(
            model=body["model"], raw_response=response,
            model_response=self.litellm.ModelResponse(), logging_obj=_NO_LOGGING,
            request_data=body, messages=body["messages"], optional_params=optional,
            litellm_params={}, encoding=None, api_key=self.settings.get("api_key"),
            json_mode=False,
        )  # fmt: skip
        read = read_reply(raw, origin, cost=self.cost(raw, response.headers), response_id=reply_id)
        if key not in self.learned and COST_HEADER not in response.headers:
            self.learn(key, raw, read, lambda r: plain_reply(reply, r, origin, anthropic, reply_id))
        return read

    def learn(self, key: Any, raw: Any, read: Any, made: Any, price: Any = None) -> None:
        """Keep `key`'s rates (`price`'s, else `cost`'s) if `made` reads `raw` at them as `read`."""
        if made(UNPRICED) is None:
            return
        names = (self._name, self._name.split("/", 1)[-1], str(key[0]), f"{self.provider}/{key[0]}")
        rates = find_rates(self.litellm, raw, tuple(dict.fromkeys(names)), price or self.cost)
        self.learned[key] = rates if rates and made(rates) == read else None

    def rates(self, key: tuple[Any, ...]) -> Rates | None:
        """The plain replies' rates of `key`, while the cost map holds them."""
        rates = self.learned.get(key)
        return rates if rates is not None and rates.holds(self.litellm.model_cost) else None

    def cost(self, raw: Any, headers: httpx.Headers | None = None) -> float | None:
        """The price litellm gives `raw`: a LiteLLM proxy's own (its cost header, which litellm
        takes), else `completion_cost`'s."""
        given = None if headers is None else headers.get(COST_HEADER)
        if given is not None:
            try:
                return float(given)
            except ValueError:
                pass
        try:
            cost = self.litellm.completion_cost(
                completion_response=raw, model=self._name, custom_llm_provider=self.provider
            )
        except Exception:  # litellm's own pricing turns a failure into no cost too
            return None
        return float(cost) if isinstance(cost, int | float) else None

    def contract(self) -> Any:
        if self._config is None:
            litellm = self.litellm
            self._config = litellm.ProviderConfigManager.get_provider_chat_config(
                model=self._name.split("/", 1)[-1], provider=litellm.LlmProviders(self.provider)
            )
        return self._config


_PATHS: weakref.WeakValueDictionary[tuple[str, str], ProviderPath] = weakref.WeakValueDictionary()


def provider_path(litellm: Any, origin: Origin, settings: dict[str, Any]) -> ProviderPath:
    """The fast path of models of this name and these settings on this event loop: shared by
    them (its client's pool and its templates; a service may make a model per request), held
    only while one of them holds it."""
    key = (origin.model, repr(sorted(settings.items(), key=lambda item: item[0])))
    path = _PATHS.get(key)
    if path is None or not path.usable():
        path = _PATHS[key] = ProviderPath(litellm, origin, settings)
    return path
