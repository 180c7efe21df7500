"""Build the API reference of `loopstate` (the names of `loopstate.__all__`) from the
docstrings, with pdoc:

    .venv/bin/python docs/build_api.py [OUTPUT_DIR]      # default: build/api

Every warning pdoc raises (an annotation it cannot resolve, a docstring it cannot parse) is an
error, and so is a public name without a docstring (exit 1, naming them): CI fails rather than
publish a reference with holes.
"""

from __future__ import annotations

import sys
import types
import warnings
from pathlib import Path
from typing import Any


def reference() -> Any:
    """Pdoc's model of `loopstate`, every public name loaded, aliases with their docstrings."""
    import pdoc.doc

    import loopstate

    for name in loopstate.__all__:
        getattr(loopstate, name)  # the lazy names (flows, replay, ...) load and stay
    module = pdoc.doc.Module(loopstate)
    for name in loopstate.__all__:
        _borrow_docstring(module.members[name])
    return module


def undocumented(module: Any) -> list[str]:
    """The public names whose entry in the reference has no docstring."""
    return [n for n in module.obj.__all__ if not module.members[n].docstring.strip()]


def _borrow_docstring(member: Any) -> None:
    """A re-exported alias (`Decision = Annotated[...]`) has its docstring under the variable
    where it is defined; pdoc looks only in `loopstate/__init__.py`. Take it from there."""
    import pdoc.doc
    import pdoc.doc_ast

    if not isinstance(member, pdoc.doc.Variable) or member.docstring.strip():
        return
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("loopstate.") or not isinstance(module, types.ModuleType):
            continue
        if module.__dict__.get(member.name) is member.default_value:
            found = pdoc.doc_ast.walk_tree(module).var_docstrings.get(member.name)
            if found:
                member.docstring = found
                return


def build(output: Path) -> Path:
    """Write the reference to `output`; return the page."""
    import pdoc.render

    import loopstate

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pdoc.render.configure(
            docformat="markdown", footer_text=f"loopstate {loopstate.__version__}"
        )
        module = reference()
        missing = undocumented(module)
        if missing:
            raise SystemExit(f"build_api: public names without a docstring: {', '.join(missing)}")
        html = pdoc.render.html_module(module, all_modules={"loopstate": module})
    output.mkdir(parents=True, exist_ok=True)
    page = output / "index.html"
    page.write_text(html, encoding="utf-8")
    return page


if __name__ == "__main__":
    print(f"wrote {build(Path(sys.argv[1] if len(sys.argv) > 1 else 'build/api'))}")
