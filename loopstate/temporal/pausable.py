"""The Updates that pause and resume a run on Temporal (`pause`, `resume`): see `limits`."""

from __future__ import annotations

from temporalio import workflow

from loopstate.engine.errors import RunNotResumable
from loopstate.engine.outside import OutsideError, outside_text
from loopstate.machines.agent.loop import AgentLoop
from loopstate.temporal.data import PauseRunRequest, ResumeRunRequest
from loopstate.temporal.limits import ask_pause, still_over
from loopstate.temporal.runs_base import RunWorkflow

_RESUMABLE = (AgentLoop.paused.id, AgentLoop.budget_exceeded.id)


class PausableRun(RunWorkflow):
    """A run that may be paused and resumed (an agent's, a flow's): the Updates it adds."""

    @workflow.update(name="pause")
    def pause(self, request: PauseRunRequest) -> bool:
        """Ask the run to stop at its next step boundary: True if it is running (it will rest
        in `paused`), False if it is not (it stays as it is)."""
        return ask_pause(self, request)

    @pause.validator
    def _validate_pause(self, request: PauseRunRequest) -> None:
        if self.finished():
            state = self.core.state
            raise RunNotResumable(f"run {state.run_id} has ended ({state.state})")
        outside_text(request.actor)

    @workflow.signal(name="pause")
    def pause_later(self, request: PauseRunRequest) -> None:
        """Fire and forget: as the Update, for a run that has not ended (an actor the entry
        rule refuses is logged and the signal dropped)."""
        try:
            outside_text(request.actor)
        except OutsideError as exc:
            self.core.log.warning("pause_refused", error=str(exc))
            return
        if not self.finished():
            ask_pause(self, request)

    @workflow.update(name="resume")
    def resume(self, request: ResumeRunRequest) -> None:
        """Continue a paused run, or one over its budget with `budget` raising it."""
        self.resume_request = request

    @workflow.signal(name="resume")
    def resume_later(self, request: ResumeRunRequest) -> None:
        """Fire and forget: as the Update (a parent workflow sends its raised budget to a
        child resting at it so); one the Update would refuse is logged and dropped."""
        try:
            self._validate_resume(request)
        except (RunNotResumable, OutsideError) as exc:
            self.core.log.warning("resume_refused", error=str(exc))
            return
        self.resume_request = request

    @resume.validator
    def _validate_resume(self, request: ResumeRunRequest) -> None:
        state = self.core.state
        if state.state not in _RESUMABLE or self.resume_request is not None:
            raise RunNotResumable(
                f"run {state.run_id} is {state.state}, not paused or budget_exceeded: "
                "nothing to resume"
            )
        outside_text(request.actor)
        over = still_over(self, request.budget)
        if over is not None:
            raise RunNotResumable(f"run {state.run_id} is still over its budget: {over.message}")
