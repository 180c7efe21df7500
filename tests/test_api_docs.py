"""Every public name is documented, the reference builds from the docstrings without a
warning, and the version comes from the installed package."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pydoc
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import loopstate

BUILD_API = Path(__file__).parent.parent / "docs" / "build_api.py"


def build_api() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_api", BUILD_API)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_api"] = module
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring_in_the_reference() -> None:
    api = build_api()
    assert api.undocumented(api.reference()) == []


def test_the_reference_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    page = build_api().build(tmp_path / "api")
    html = page.read_text()
    for name in ("RunResult", "Recorder", "Usage", "replay_sync", "RunBusy", "StopCondition"):
        assert f'id="{name}"' in html, name


def test_help_of_run_result_starts_with_what_it_is() -> None:
    text = pydoc.render_doc(loopstate.RunResult, renderer=pydoc.plaintext)
    head = text.split("Method resolution order")[0]  # the signature, then the docstring
    assert "What `Agent.run` and `Agent.resume` return" in head
    assert "A base class for creating Pydantic models" not in head


def test_the_version_is_the_installed_packages() -> None:
    assert loopstate.__version__ == importlib.metadata.version("loopstate")


def test_replay_is_the_function_even_after_its_module_was_imported() -> None:
    code = "import loopstate.replay; from loopstate import replay; print(replay.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "loopstate.replay"  # a module has no __module__
