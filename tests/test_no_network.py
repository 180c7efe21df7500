"""loopstate imports litellm only when a model is called, and a call connects to nothing but
the model's api_base: litellm does not fetch its price map from the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from model_server import serve, text_reply

COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"

# Records every name lookup and connection of the process; with "block", refuses any host but
# 127.0.0.1, so a fetch that the test provokes on purpose never leaves the machine.
CALL_ONCE = textwrap.dedent(
    """
    import asyncio, json, os, sys
    url, block = sys.argv[1], sys.argv[2] == "block"
    lookups, connects = [], []
    def audit(event, args):
        if event == "socket.getaddrinfo":
            lookups.append(str(args[0]))
            if block and args[0] != "127.0.0.1":
                raise PermissionError(f"this test allows no network: {args[0]}")
        elif event == "socket.connect":
            address = args[1]
            connects.append(list(address[:2]) if isinstance(address, tuple) else repr(address))
    sys.addaudithook(audit)

    from loopstate.engine.models.litellm import LiteLLMModel
    from loopstate.engine.messages import UserMessage
    from loopstate.engine.model import ModelRequest

    before = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    model = LiteLLMModel("openai/test-model", api_base=url + "/v1", api_key="k")
    request = ModelRequest(messages=(UserMessage(content="hi"),))
    reply = asyncio.run(model.complete(request))

    from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
    print(json.dumps({
        "reply": reply.message.content,
        "before": before,
        "after": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
        "cost_map": get_model_cost_map_source_info()["source"],
        "lookups": lookups,
        "connects": connects,
    }))
    """
)


def run_python(code: str, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent,
        timeout=300,  # a margin for a stuck child, not a time relied on
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def environment(cost_map: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != COST_MAP}
    return env if cost_map is None else {**env, COST_MAP: cost_map}


def call_once(cost_map: str | None, *, block: bool = False) -> tuple[dict[str, Any], int]:
    with serve(text_reply("hi")) as server:
        out = run_python(CALL_ONCE, server.url, "block" if block else "", env=environment(cost_map))
    child: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    assert child["reply"] == "hi"
    return child, server.port


def test_importing_loopstate_and_building_a_model_does_not_import_litellm() -> None:
    code = (
        "import sys, loopstate; loopstate.LiteLLMModel('openai/x', api_key='k'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'litellm'))"
    )
    assert run_python(code, env=environment(None)).strip() == "[]"


@pytest.fixture(scope="module")
def default_call() -> tuple[dict[str, Any], int]:
    """One call in a child process whose environment leaves the price map to loopstate."""
    return call_once(None)


def test_a_call_connects_only_to_the_model_server(default_call: tuple[dict[str, Any], int]) -> None:
    child, port = default_call
    assert child["connects"]
    assert {tuple(c) for c in child["connects"]} == {("127.0.0.1", port)}
    assert set(child["lookups"]) <= {"127.0.0.1"}


def test_litellm_is_told_to_use_its_bundled_price_map_when_the_user_did_not_choose(
    default_call: tuple[dict[str, Any], int],
) -> None:
    child, _ = default_call
    assert (child["before"], child["after"]) == (None, "True")
    assert child["cost_map"] == "local"


def test_a_users_own_price_map_choice_is_not_overridden() -> None:
    # "custom" is not "true", so litellm tries its remote map; the child refuses that lookup.
    child, _ = call_once("custom", block=True)
    assert (child["before"], child["after"]) == ("custom", "custom")
    assert set(child["lookups"]) - {"127.0.0.1"}  # litellm saw the user's value and tried
