"""What the model adapter borrows from litellm and the OpenAI SDK, read from its source, and
the litellm it was checked on.

A borrowed name is anything but the vendors' public API: an import from a litellm submodule
or a private SDK module, a private attribute (`obj._name`, `getattr(obj, "_name")`) of
something not our own, a litellm submodule reached through `litellm.`. Only
`engine/models/litellm_contract.py` may borrow (at most 8 names, each explained there).
"""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
import types
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from loopstate.engine.models.litellm import _import_litellm

ROOT = Path(__file__).parents[1]
MODELS = ROOT / "engine" / "models"
CONTRACT = "litellm_contract.py"
VENDORS = frozenset({"litellm", "openai"})
# The litellm release line the model tests ran on (constraints.txt pins its newest).
CHECKED = ("1.110.2", "1.111")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def borrowed(source: str) -> set[str]:
    """The names `source` borrows from litellm or the OpenAI SDK (see the module's doc)."""
    modules = {n for n in dir(_import_litellm()) if _is_module(n)}
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found |= _imported(node)
        elif isinstance(node, ast.Attribute):
            found |= _attribute(node, modules)
        elif isinstance(node, ast.Call):
            found |= _by_name(node)
    return found


def _is_module(name: str) -> bool:
    return isinstance(getattr(_import_litellm(), name, None), types.ModuleType)


def _imported(node: ast.ImportFrom) -> set[str]:
    parts = (node.module or "").split(".")
    if parts[0] not in VENDORS:
        return set()
    submodule = parts[0] == "litellm" and len(parts) > 1
    return {
        f"{node.module}.{alias.name}"
        for alias in node.names
        if submodule or any(map(_private, parts)) or _private(alias.name)
    }


def _attribute(node: ast.Attribute, litellm_modules: set[str]) -> set[str]:
    base = node.value.id if isinstance(node.value, ast.Name) else None
    if _private(node.attr) and base not in ("self", "cls"):
        return {f"._{node.attr.lstrip('_')}"}
    if base == "litellm" and node.attr in litellm_modules:
        return {f"litellm.{node.attr}"}
    return set()


def _by_name(node: ast.Call) -> set[str]:
    """`getattr(obj, "_name")` and `setattr(obj, "_name", ...)`."""
    if getattr(node.func, "id", None) not in ("getattr", "setattr") or len(node.args) < 2:
        return set()
    name = node.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
        return {f"._{name.value.lstrip('_')}"}
    return set()


def test_the_scan_finds_each_kind_of_borrowing() -> None:
    source = (
        "from litellm.utils import a\nfrom openai._json import b\nimport litellm\n"
        "x = raw._hidden_params\ny = getattr(raw, '_z', None)\nz = litellm.llms\n"
        "ok = self._own\nfine = litellm.acompletion\nfrom openai import AsyncOpenAI\n"
    )
    assert borrowed(source) == {
        "litellm.utils.a", "openai._json.b", "._hidden_params", "._z", "litellm.llms"
    }  # fmt: skip


def test_only_the_contract_module_borrows_and_it_borrows_at_most_eight_names() -> None:
    by_module = {p.name: borrowed(p.read_text()) for p in sorted(MODELS.glob("*.py"))}
    borrowing = {name for name, names in by_module.items() if names}
    assert borrowing <= {CONTRACT}, borrowing - {CONTRACT}
    assert 1 <= len(by_module[CONTRACT]) <= 8, by_module[CONTRACT]


def test_the_allowed_litellm_is_the_range_the_model_tests_ran_on() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (litellm,) = [Requirement(r) for r in project["dependencies"] if r.startswith("litellm")]
    low, high = CHECKED
    allowed = {s.operator: s.version for s in litellm.specifier if s.operator != "!="}
    assert allowed == {">=": low, "<": high}
    # the compromised releases stay excluded, whatever the range
    assert {"1.82.7", "1.82.8"} <= {s.version for s in litellm.specifier if s.operator == "!="}
    installed = Version(importlib.metadata.version("litellm"))
    assert installed in litellm.specifier
    pinned = (ROOT / "constraints.txt").read_text().splitlines()
    assert f"litellm=={installed}" in pinned


def test_every_vendor_package_the_adapter_imports_is_declared() -> None:
    imported: set[str] = set()
    for path in MODELS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(r).name for r in project["dependencies"]}
    third_party = imported - {"loopstate", "__future__"} - set(_stdlib())
    assert third_party <= declared, third_party - declared


def _stdlib() -> frozenset[str]:
    import sys

    return frozenset(sys.stdlib_module_names)
