"""loopstate imports litellm only when a model is called (and mcp not at all), and a call
connects to nothing but the model's api_base: litellm does not fetch its price map from the
network. Tool calls work through litellm without its `mcp` extra (mcp, starlette, uvicorn,
...): LiteLLMModel skips litellm's MCP gateway. Each checked in a fresh interpreter (two in
all: the imports and the environment at start-up are the point), over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from model_server import serve, text_reply, tool_call_reply

COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"

# Records every name lookup and connection of the process; with "block", refuses any host but
# 127.0.0.1, so a fetch that the test provokes on purpose never leaves the machine; with
# "light", the packages of litellm's `mcp` extra are not importable. Then one tool-call round
# trip through an agent.
CHILD = textwrap.dedent(
    '''
    import importlib.abc, json, os, sys
    url, flags = sys.argv[1], set(sys.argv[2:])
    lookups, connects = [], []
    def audit(event, args):
        if event == "socket.getaddrinfo":
            lookups.append(str(args[0]))
            if "block" in flags and args[0] != "127.0.0.1":
                raise PermissionError(f"this test allows no network: {args[0]}")
        elif event == "socket.connect":
            address = args[1]
            connects.append(list(address[:2]) if isinstance(address, tuple) else repr(address))
    sys.addaudithook(audit)

    class Absent(importlib.abc.MetaPathFinder):
        """As if litellm's `mcp` extra were not installed."""
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {"mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette"}:
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    if "light" in flags:
        sys.meta_path.insert(0, Absent())

    from loopstate import Agent, LiteLLMModel, MemoryStore, tool

    imported = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))

    before = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    model = LiteLLMModel("openai/test-model", api_base=url + "/v1", api_key="sk-test")
    built = sorted(m for m in sys.modules if m.split(".")[0] == "litellm")

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    result = Agent(model, [add], store=MemoryStore()).run_sync("1 + 2?")

    from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
    print(json.dumps({
        "output": result.output,
        "mcp_when_imported": imported,
        "litellm_when_built": built,
        "before": before,
        "after": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
        "cost_map": get_model_cost_map_source_info()["source"],
        "lookups": lookups,
        "connects": connects,
        "extras": sorted({m.split(".")[0] for m in sys.modules} & {"mcp", "starlette", "uvicorn"}),
    }))
    '''
)


def environment(cost_map: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != COST_MAP}
    return env if cost_map is None else {**env, COST_MAP: cost_map}


def call_once(cost_map: str | None, *flags: str) -> tuple[dict[str, Any], int, list[Any]]:
    """A fresh interpreter's tool-call round trip: what it saw, the server's port, requests."""
    with serve(tool_call_reply(("c1", "add", {"a": 1, "b": 2})), text_reply("3")) as server:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, server.url, *flags], capture_output=True, text=True,
            env=environment(cost_map), cwd=Path(__file__).parent,
            timeout=300,  # a margin for a stuck child, not a time relied on
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    child: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["output"] == "3"
    return child, server.port, [request.body for request in server.requests]


@pytest.fixture(scope="module")
def default_call() -> tuple[dict[str, Any], int, list[Any]]:
    """A child process whose environment leaves the price map to loopstate."""
    return call_once(None)


@pytest.fixture(scope="module")
def custom_light_call() -> tuple[dict[str, Any], int, list[Any]]:
    """A child process with the user's own price map choice and no `mcp` extra installed."""
    return call_once("custom", "block", "light")


def test_importing_loopstate_and_building_a_model_does_not_import_litellm(
    default_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    child, _, _ = default_call
    assert child["litellm_when_built"] == []


def test_import_loopstate_imports_no_mcp(
    default_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    child, _, _ = default_call
    assert child["mcp_when_imported"] == []


def test_a_call_connects_only_to_the_model_server(
    default_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    child, port, _ = default_call
    assert child["connects"]
    assert {tuple(c) for c in child["connects"]} == {("127.0.0.1", port)}
    assert set(child["lookups"]) <= {"127.0.0.1"}


def test_litellm_is_told_to_use_its_bundled_price_map_when_the_user_did_not_choose(
    default_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    child, _, _ = default_call
    assert (child["before"], child["after"]) == (None, "True")
    assert child["cost_map"] == "local"


def test_a_users_own_price_map_choice_is_not_overridden(
    custom_light_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    # "custom" is not "true", so litellm tries its remote map; the child refuses that lookup.
    child, _, _ = custom_light_call
    assert (child["before"], child["after"]) == ("custom", "custom")
    assert set(child["lookups"]) - {"127.0.0.1"}  # litellm saw the user's value and tried


def test_a_tool_call_round_trip_needs_no_mcp_package(
    custom_light_call: tuple[dict[str, Any], int, list[Any]],
) -> None:
    child, _, bodies = custom_light_call
    assert child["extras"] == []
    assert bodies[0]["tools"][0]["function"]["name"] == "add"
    assert all("_skip_mcp_handler" not in body for body in bodies)  # never sent
