"""What loopstate's model adapter borrows from litellm or the OpenAI SDK beyond their
documented public API: each name here, with why it is needed and what happens if it goes.

The rule (tests/test_model_contract.py checks it by reading the source): a module of
`engine/models/` uses litellm and the SDK through their public API (`litellm.acompletion`,
`litellm.stream_chunk_builder`, `litellm.get_llm_provider`, the exceptions litellm raises,
...), and anything else only through this module, so an upgrade's breakage is found in one
place. The fast paths (`openai_client`, `openai_direct`, `openai_stream`, `anthropic_client`,
`anthropic_direct`, `anthropic_history`, `litellm_price`) still borrow on their own: issue 28
replaces them with one path on litellm's provider-config contract, borrowing through here.
The test lists them and fails if any other module starts borrowing, or this one holds more
than 8 names.

Every borrowed name is read defensively: when it is gone, the caller gets the answer it
would give without it (an unknown cost), never an exception from here.
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


def http_handler(transport: Any) -> Any:
    """Litellm's HTTP handler (what its base handler posts with) over `transport`.

    Borrowed: `litellm.llms.custom_httpx.http_handler.AsyncHTTPHandler`, the type litellm's
    base handler takes as `client` (its `transport` argument: an httpx transport of ours, so
    litellm's requests are seen as they go out, without subclassing its handler).
    """
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    return AsyncHTTPHandler(transport=transport)
