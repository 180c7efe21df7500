"""What a run shows the world without a worker: its status and pending calls as search
attributes (list runs by them) and the pending requests in its memo (read them with the list).
Published only when they change, so a step adds no history event unless they do."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.state import RunState
from loopstate.temporal.data import AGENT_ATTRIBUTE, PENDING_ATTRIBUTE, STATUS_ATTRIBUTE

STATUS = SearchAttributeKey.for_keyword(STATUS_ATTRIBUTE)
PENDING = SearchAttributeKey.for_keyword_list(PENDING_ATTRIBUTE)
AGENT = SearchAttributeKey.for_keyword(AGENT_ATTRIBUTE)


class Publisher:
    def __init__(self, agent: str, search_attributes: bool) -> None:
        self.agent = agent
        self.enabled = search_attributes
        self._shown: tuple[str, tuple[str, ...]] | None = None

    def publish(self, state: RunState, pending: list[ApprovalRequest]) -> None:
        """Show `state`'s status and `pending` (the calls to decide through this run)."""
        shown = (state.status, tuple(p.call_id for p in pending))
        if shown == self._shown:
            return
        first = self._shown is None
        self._shown = shown
        memo: dict[str, Any] = {
            "loopstate_agent": self.agent,
            "loopstate_pending": [p.model_dump(mode="json") for p in pending],
        }
        workflow.upsert_memo(memo)
        if self.enabled:
            updates: list[SearchAttributeUpdate[Any]] = [
                STATUS.value_set(shown[0]),
                PENDING.value_set(list(shown[1])),
            ]
            if first:
                updates.append(AGENT.value_set(self.agent))
            workflow.upsert_search_attributes(updates)
