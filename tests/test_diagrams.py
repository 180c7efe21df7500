"""Diagrams are complete by construction, deterministic, and accepted by the real renderers."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from statemachine import State, StateChart
from support import forking, make_tools
from support.cli import loopstate

from loopstate import Agent, Approve, ScriptedModel
from loopstate.engine.diagram import (
    GraphvizNotFound,
    graph_of,
    overlay_of,
    render,
    to_dot,
    to_mermaid,
)
from loopstate.engine.models.scripted import call, calls
from loopstate.engine.stores.sqlite import SQLiteStore
from loopstate.machines import SHIPPED

ROOT = Path(__file__).parent.parent
NODE_CHECKER = ROOT / "tests" / "js" / "parse-mermaid.mjs"


class Outer(StateChart):  # type: ignore[type-arg]
    """A user's machine with a compound state, a guard and a self-transition."""

    idle = State(initial=True)

    class working(State.Compound):  # type: ignore[misc]
        a = State(initial=True)
        b = State()
        go = a.to(b)
        back = b.to(a, cond="can_go_back")

    done = State(final=True)
    begin = idle.to(working)
    finish = working.to(done)
    poke = idle.to.itself()

    def can_go_back(self) -> bool:
        return True


MACHINES = {**SHIPPED, "user-compound": Outer}


def defined_edges(machine: type) -> Counter[tuple[str, str, str]]:
    """Every transition of the definition that has an event, as (source, target, event)."""
    return Counter(
        (state.id, t.target.id, str(event))
        for state in machine.states_map.values()
        for t in state.transitions
        for event in t.events
    )


def mermaid_edges(text: str) -> Counter[tuple[str, str, str]]:
    found = re.findall(r"^\s*(\w+) --> (\w+) : (\w+)", text, re.M)
    return Counter((s, t, e) for s, t, e in found)


def dot_edges(text: str) -> Counter[tuple[str, str, str]]:
    edges: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        m = re.match(r'\s*"(\w+)" -> "(\w+)" \[label="(\w+)[^"]*"(.*)\];', line)
        if m is None:
            continue
        source, target, event, rest = m.groups()
        tail = re.search(r'ltail="cluster_(\w+)"', rest)
        head = re.search(r'lhead="cluster_(\w+)"', rest)
        edges[(tail.group(1) if tail else source, head.group(1) if head else target, event)] += 1
    return edges


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_exported_edges_equal_the_machine_transitions(name: str) -> None:
    machine = MACHINES[name]
    graph = graph_of(machine)
    expected = defined_edges(machine)
    assert expected  # a machine with no transitions would prove nothing
    assert mermaid_edges(to_mermaid(graph)) == expected
    assert dot_edges(to_dot(graph)) == expected


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_guards_initial_and_final_states_are_marked(name: str) -> None:
    machine = MACHINES[name]
    mermaid, dot = to_mermaid(graph_of(machine)), to_dot(graph_of(machine))
    initial = machine.initial_state.id
    assert f"[*] --> {initial}" in mermaid
    assert f'"__initial__" -> "{initial}"' in dot
    for final in machine.final_states:
        assert f"{final.id} --> [*]" in mermaid
        assert re.search(rf'"{final.id}" \[label="[^"]*", peripheries=2', dot)
    guarded = [
        (s.id, t.target.id, str(e), spec)
        for s in machine.states_map.values()
        for t in s.transitions
        for e in t.events
        for spec in (c.func for c in t.cond)
    ]
    if name == "agent":
        assert {g[3] for g in guarded} == {
                "is_answer", "has_gated_calls", "stop_requested", "has_batch", "waits_on_child",
            }  # fmt: skip
    for source, target, event, guard in guarded:
        assert re.search(rf"{source} --> {target} : {event} \[.*{guard}", mermaid)


def test_the_same_machine_gives_the_same_bytes_in_separate_processes() -> None:
    code = (
        "from loopstate.engine.diagram import graph_of, to_dot, to_mermaid;"
        "from loopstate.machines import AgentLoop;"
        "g = graph_of(AgentLoop); print(to_dot(g) + to_mermaid(g))"
    )
    outs = {
        forking.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(outs) == 1
    assert "0x" not in outs.pop()  # no id()-based names


def check_mermaid(texts: list[str]) -> list[dict[str, object]]:
    assert (ROOT / "tests/js/node_modules/mermaid").exists(), (
        "the Mermaid parser is not installed: run `bash scripts/setup` (npm ci in tests/js)"
    )
    out = forking.run(
        ["node", str(NODE_CHECKER)], input=json.dumps(texts), capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    results: list[dict[str, object]] = json.loads(out.stdout)
    return results


async def a_real_run(tmp_path: Path) -> tuple[object, str]:
    _, tools = make_tools()
    model = ScriptedModel([
        calls(call("read_file", {"path": "a"}), call("write_file", {"path": "b", "content": "x"})),
        call("read_file", {"path": "c"}),
        call("read_file", {"path": "d"}),
        "done",
    ])  # fmt: skip

    async def approve(requests):
        return {r.call_id: Approve() for r in requests}

    store = SQLiteStore(tmp_path / "runs.db")
    result = await Agent(model, tools, approver=approve, store=store, ids=lambda: "r1").run("go")
    return result, str(tmp_path / "runs.db")


async def test_the_real_mermaid_parser_accepts_every_diagram_and_rejects_a_broken_one(
    tmp_path: Path,
) -> None:
    result, _ = await a_real_run(tmp_path)
    overlay = overlay_of(result.transitions, "done")  # type: ignore[attr-defined]
    texts = [to_mermaid(graph_of(m)) for m in MACHINES.values()]
    texts.append(to_mermaid(graph_of(SHIPPED["agent"]), overlay))
    broken = [
        "stateDiagram-v2\n    a -> b\n",
        "stateDiagrm-v2\n    a --> b\n",
        "stateDiagram-v2\n    state x {\n        a --> b\n",
    ]
    results = check_mermaid(texts + broken)
    assert [r["ok"] for r in results[: len(texts)]] == [True] * len(texts), results
    assert [r["ok"] for r in results[len(texts) :]] == [False] * len(broken)


async def test_graphviz_renders_every_dot_output_to_svg(tmp_path: Path) -> None:
    result, _ = await a_real_run(tmp_path)
    overlay = overlay_of(result.transitions, "done")  # type: ignore[attr-defined]
    dots = [to_dot(graph_of(m)) for m in MACHINES.values()]
    dots.append(to_dot(graph_of(SHIPPED["agent"]), overlay))
    for dot in dots:
        svg = render(dot, "svg").decode()
        assert svg.lstrip().startswith("<?xml")
        assert "</svg>" in svg


def drawn(*args: str, cwd: Path) -> str:
    """`loopstate ARGS`'s output; it must succeed."""
    out = loopstate(*args, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_a_stored_run_drawn_on_its_machine_counts_its_transitions(tmp_path: Path) -> None:
    result, db = await a_real_run(tmp_path)
    recorded = Counter((t.source, t.target, t.event) for t in result.transitions)  # type: ignore[attr-defined]
    out = drawn("diagram", "agent", "--run", "r1", "--db", db, "--format", "dot", cwd=tmp_path)
    counted = Counter()
    for line in out.splitlines():
        m = re.match(r'\s*"(\w+)" -> "(\w+)" \[label="(\w+)[^"]* ×(\d+)"', line)
        if m:
            counted[(m.group(1), m.group(2), m.group(3))] += int(m.group(4))
    assert counted == recorded
    assert re.search(r'"done" \[label="Done", fillcolor="#ffe082"', out)  # current: rests there
    assert re.search(r'"failed" \[[^]]*fontcolor="#9e9e9e"', out)  # never visited
    mermaid = drawn("diagram", "--run", "r1", "--db", db, cwd=tmp_path)
    assert "executing_tool --> thinking : tools_done ×3" in mermaid
    assert "class done current" in mermaid


def test_the_committed_diagrams_are_fresh(tmp_path: Path) -> None:
    drawn("diagram", "--all", str(tmp_path), cwd=tmp_path)
    committed = sorted(p.name for p in (ROOT / "diagrams").iterdir())
    assert committed == sorted(p.name for p in tmp_path.iterdir())
    for name in committed:
        fresh, kept = (tmp_path / name).read_text(), (ROOT / "diagrams" / name).read_text()
        if name.endswith(".svg"):  # Graphviz stamps its version in a comment
            fresh, kept = (re.sub(r"<!--.*?-->", "", t, flags=re.S) for t in (fresh, kept))
        assert fresh == kept, f"diagrams/{name} is stale: run `loopstate diagram --all diagrams/`"


def test_the_readme_embeds_the_agent_loop_diagram() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"```mermaid\n{(ROOT / 'diagrams/agent.mmd').read_text()}```" in readme


def test_svg_without_graphviz_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(GraphvizNotFound, match="Graphviz's `dot` program, which is not on PATH"):
        render(to_dot(graph_of(SHIPPED["agent"])), "svg")


def test_the_cli_draws_a_users_machine_and_names_unknown_targets(tmp_path: Path) -> None:
    (tmp_path / "mymachines.py").write_text(
        "from statemachine import State, StateChart\n"
        "class Door(StateChart):\n"
        "    closed = State(initial=True)\n"
        "    gone = State(final=True)\n"
        "    smash = closed.to(gone)\n"
    )
    out = drawn("diagram", "mymachines:Door", cwd=tmp_path)
    assert "closed --> gone : smash" in out
    bad = loopstate("diagram", "nope", cwd=tmp_path)
    assert bad.returncode == 2
    assert "no shipped machine 'nope' (known: agent" in bad.stderr
