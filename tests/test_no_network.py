"""A run connects to nothing but the model's api_base, and litellm never phones home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from model_server import serve, text_reply

CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys
    connects = []
    def audit(event, args):
        if event == "socket.connect":
            connects.append(repr(args[1]))
    sys.addaudithook(audit)
    from loopstate import Agent, LiteLLMModel
    before = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    model = LiteLLMModel("openai/test-model", api_base=sys.argv[1] + "/v1", api_key="k")
    result = asyncio.run(Agent(model).run("hello"))
    print(json.dumps({"status": result.status, "connects": connects, "before": before,
                      "after": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")}))
    """
)


def run_child(url: str, env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=Path(__file__).parent,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_run_connects_only_to_the_model_server_and_sets_the_local_cost_map() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    with serve(text_reply("hi")) as server:
        result = run_child(server.url, env)
    assert result["status"] == "done"
    assert result["before"] is None
    assert result["after"] == "True"
    assert result["connects"]
    assert set(result["connects"]) == {repr(("127.0.0.1", server.port))}


def test_a_users_explicit_cost_map_choice_is_not_overridden() -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true"}
    with serve(text_reply("hi")) as server:
        result = run_child(server.url, env)
    assert (result["before"], result["after"]) == ("true", "true")
