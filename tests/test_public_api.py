"""The public API is exactly this: adding a name is a decision, removing one breaks users."""

from __future__ import annotations

import subprocess
import sys

import loopstate

PUBLIC = [
    "Abort", "Agent", "AgentLoop", "ApprovalPolicy", "ApprovalRequest", "Approve",
    "AssistantMessage", "Budget", "CallRecord", "Cassette", "CassetteError", "Decision",
    "DecisionError", "Definition", "DefinitionError", "Deny", "Departure", "Edit", "Escalate",
    "Event", "Flow", "FlowData", "FlowDeps", "FlowMachine", "FlowResult", "ForkRefused",
    "Gate", "Hooks", "IncompatibleRun", "LiteLLMModel", "LoopstateError", "MemoryStore",
    "Message", "Migration", "Model", "ModelError", "ModelRequest", "ModelResponse", "Output",
    "ParentLink", "Phase", "PostgresStore", "Recorder", "ReplayDivergence", "ReplayModel",
    "RetryPolicy", "RetryingModel", "Rule", "RunBusy", "RunDamaged", "RunFailure",
    "RunInterrupted", "RunNotFound", "RunNotResumable", "RunResult", "RunState", "RunSummary",
    "RunTree", "SQLiteStore", "ScriptExhausted", "ScriptedModel", "StopCondition", "Store",
    "StoreError", "SystemMessage", "TokenBudget", "Tool", "ToolCall", "ToolContext",
    "ToolDefinition", "ToolDefinitionWarning", "ToolMessage", "ToolRegistry", "Transition",
    "Turn", "UnexpectedRequest", "Usage", "UsageReport", "UserMessage", "chain_approvers",
    "compose", "has_tool_call", "merge", "pending_tree", "reads", "replay", "replay_flow",
    "replay_sync", "run_tree", "step_count_is", "tool", "usage_tree",
]  # fmt: skip


def test_all_is_sorted_and_exactly_the_public_names() -> None:
    assert loopstate.__all__ == sorted(loopstate.__all__)
    assert loopstate.__all__ == PUBLIC


TESTING = [
    "Cassette", "Recorder", "ReplayDivergence", "ReplayModel", "ScriptExhausted", "ScriptedModel",
    "Turn", "UnexpectedRequest", "call", "calls", "replay", "replay_flow", "replay_sync", "text",
]  # fmt: skip


def test_the_test_kit_is_exactly_its_names_and_the_old_path_still_works() -> None:
    import loopstate.testing
    from loopstate.engine.models import scripted

    kit = loopstate.testing
    assert kit.__all__ == TESTING
    # one object whichever path a test imports it by
    for name in ("ScriptedModel", "Turn", "call", "calls", "text"):
        assert getattr(kit, name) is getattr(scripted, name), name
    for name in set(TESTING) & set(loopstate.__all__):
        assert getattr(kit, name) is getattr(loopstate, name), name


def test_every_public_name_resolves() -> None:
    for name in loopstate.__all__:
        assert getattr(loopstate, name) is not None, name


# What `import loopstate` must not import: the extras' drivers and litellm (nor its CLI's parser,
# nor its test kit), and what most programs never use or need only later, loaded on first use
# (each costs tens of ms of every CLI command, worker and test process): jsonschema (decision
# checks without the tool at hand), the recording machinery (replays, cassettes), flows,
# structlog (the first log line), httpx (the first model call); nor does the CLI's parser,
# which every command builds, import what one command uses: the diagram code.
OPTIONAL = (
    "litellm", "psycopg", "fastapi", "sse_starlette", "uvicorn", "starlette", "temporalio",
    "opentelemetry", "mcp",
)  # fmt: skip
ON_FIRST_USE = (
    "jsonschema", "loopstate.engine.recording", "loopstate.machines.flows", "structlog", "httpx",
)  # fmt: skip
BY_ONE_COMMAND = ("loopstate.engine.diagram", "statemachine.contrib")


def test_loopstate_its_cli_and_its_test_kit_import_no_extra_nor_first_use_module() -> None:
    code = (
        "import sys, loopstate;"
        f"print([m for m in {ON_FIRST_USE!r} if m in sys.modules]);"
        "from loopstate.cli import build_parser; build_parser();"
        f"print([m for m in {ON_FIRST_USE + BY_ONE_COMMAND!r} if m in sys.modules]);"
        "import loopstate.testing;"
        f"print([m for m in {OPTIONAL!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]", "[]"]


def test_the_exception_tree_docstring_names_every_error_class() -> None:
    import importlib
    import pkgutil

    import loopstate.engine
    import loopstate.machines
    import loopstate.tools
    from loopstate.engine import errors

    for package in (loopstate.engine, loopstate.machines, loopstate.tools):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(info.name)

    def subclasses(cls: type) -> set[type]:
        found = set(cls.__subclasses__())
        return found.union(*(subclasses(c) for c in found))

    # the walked packages' classes only: which other modules a test imported before is no matter
    walked = ("loopstate.engine.", "loopstate.machines.", "loopstate.tools.")
    ours = {c for c in subclasses(errors.LoopstateError) if c.__module__.startswith(walked)}
    assert len(ours) >= 15
    doc = errors.__doc__ or ""
    missing = sorted(c.__name__ for c in ours if f"── {c.__name__} " not in doc)
    assert not missing, f"add these to the tree in engine/errors.py: {missing}"
