"""One model call of the agent loop's `thinking` step: the request as the model is shown
it, announced (`model_requested`), the hooks around it, streamed when the model can and a
hook listens, and the reply made storable with run-unique call ids before anything sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loopstate.engine.callids import with_run_ids
from loopstate.engine.core import RunCore
from loopstate.engine.events import ModelRequested
from loopstate.engine.messages import Message
from loopstate.engine.model import Model, ModelRequest, ModelResponse, ToolChoice
from loopstate.engine.sanitize import storable
from loopstate.engine.state import RunState
from loopstate.engine.streaming import DeltaRelay, StreamingModel
from loopstate.engine.tool import Tool


class ModelCall:
    """Calls one loop's model, one step at a time."""

    def __init__(self, core: RunCore, model: Model, tools: Iterable[Tool]) -> None:
        self.core = core
        self.model = model
        self.definitions = tuple(t.definition for t in tools)
        self.tool_names = tuple(d.name for d in self.definitions)  # shared by its events
        self._used_ids: set[str] | None = None

    def request(
        self,
        state: RunState,
        view: Callable[[tuple[Message, ...]], tuple[Message, ...]] | None,
        tool_choice: ToolChoice,
    ) -> ModelRequest:
        # unvalidated: the history is already-validated data; re-validating it every step
        # would make a step cost grow with the history. Fleeting: the request is dropped
        # after its call (nothing in the run keeps it).
        return ModelRequest.fleeting(
            messages=state.messages if view is None else view(state.messages),
            tools=self.definitions,
            tool_choice=tool_choice,
            step=state.steps + 1,
        )

    async def call(self, request: ModelRequest) -> ModelResponse:
        core, model, hooks = self.core, self.model, self.core.hooks
        await core.emit(
            ModelRequested.trusted(
                **core.at(step=request.step),
                model=model.name,
                messages=len(request.messages),
                tools=self.tool_names,
            )
        )
        if hooks is not None:
            await hooks.before_model(request)
        if hooks is not None and hooks.streams and isinstance(model, StreamingModel):
            relay = DeltaRelay(core.state.run_id, request.step, core.ports.clock, hooks)
            response = await model.stream(request, relay)
        else:
            response = await model.complete(request)
        # What enters the run must be storable whatever the port sent (lone surrogates).
        response = storable(response)
        # Run-unique call ids before anything (hooks, records, events, store) sees the reply.
        calls = core.state.calls
        used = self._used_ids
        if used is None:  # once per process: the set then grows with each turn
            used = self._used_ids = {c.call_id for c in calls}
        response = with_run_ids(response, used, len(calls) + 1)
        used.update(c.id for c in response.message.calls)
        if hooks is not None:
            await hooks.after_model(request, response)
        return response
