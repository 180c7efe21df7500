"""docs/architecture.md's layering, enforced on the source (every import, read by `ast`):
`loopstate/` → `machines/` → `tools/` → `engine/`, one way; the service never imports the
CLI; only the model adapters (modules under `engine/models/`) import litellm."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("engine", "tools", "machines", "loopstate")  # each may import those before it


def layer(module: str) -> int | None:
    """The layer of an imported module (None: not loopstate's)."""
    parts = module.split(".")
    if parts[0] != "loopstate":
        return None
    inner = parts[1] if len(parts) > 1 and parts[1] in LAYERS[:3] else "loopstate"
    return LAYERS.index(inner)


@cache
def imports() -> tuple[tuple[str, str], ...]:
    """(source file, imported module) for every import of the package's source."""
    return tuple(_imports())


def _imports() -> Iterator[tuple[str, str]]:
    for folder in LAYERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    assert node.level == 0, f"{path}: a relative import; name loopstate.*"
                    names = [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                yield from ((str(path.relative_to(ROOT)), name) for name in names)


def broken(source: str, module: str) -> str | None:
    """The rule `source` importing `module` breaks, if any."""
    own, theirs = LAYERS.index(source.split("/")[0]), layer(module)
    if theirs is not None and theirs > own:
        return "imports go loopstate/ → machines/ → tools/ → engine/, one way"
    if source.startswith("loopstate/service/") and module.startswith("loopstate.cli"):
        return "the service never imports the CLI"
    if module.split(".")[0] == "litellm" and not source.startswith("engine/models/"):
        return "only the model adapters (engine/models/) import litellm"
    return None


def test_every_import_keeps_the_layering() -> None:
    found = [(s, m, why) for s, m in imports() if (why := broken(s, m)) is not None]
    assert found == []


def test_the_rules_catch_what_they_forbid() -> None:
    assert broken("engine/core.py", "loopstate.machines.agent.steps")
    assert broken("tools/registry.py", "loopstate.machines")
    assert broken("machines/agent/agent.py", "loopstate.cli.errors")
    assert broken("engine/tree.py", "loopstate.Agent")  # `from loopstate import Agent`
    assert broken("loopstate/service/api_streams.py", "loopstate.cli.diagram.machine_class")
    assert broken("engine/history.py", "litellm.token_counter")
    assert not broken("engine/models/litellm.py", "litellm")
    assert not broken("machines/flows/flow.py", "loopstate.engine.core.RunCore")
    assert not broken("loopstate/cli/diagram.py", "loopstate.machines.machine_class")
    assert len(imports()) > 1000  # it reads the whole source
