"""`@tool` warns, pointing at the function, when the model would be told too little."""

from __future__ import annotations

import warnings

import pytest

from loopstate import ToolDefinitionWarning, tool


def test_a_parameter_without_a_type_hint_is_warned_about_at_the_functions_line() -> None:
    with pytest.warns(ToolDefinitionWarning, match="parameter 'b' has no type hint") as caught:

        @tool
        def add(a: int, b) -> int:  # type: ignore[no-untyped-def]
            """Add two numbers."""
            return a + int(b)

    (warning,) = caught
    assert warning.filename == __file__
    assert warning.lineno == add.fn.__code__.co_firstlineno
    assert add.definition.parameters["properties"]["b"] == {"title": "B"}  # untyped indeed


def test_a_tool_without_a_docstring_is_warned_about() -> None:
    with pytest.warns(ToolDefinitionWarning, match="no docstring.*only its name"):

        @tool(needs_approval=True)
        def add(a: int, b: int) -> int:
            return a + b

    assert add.description == "add"


def test_a_typed_and_documented_tool_is_silent_and_the_warning_can_be_silenced() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        warnings.filterwarnings("ignore", category=ToolDefinitionWarning)

        @tool
        def sub(a, b):  # type: ignore[no-untyped-def]
            return a - b

    assert (add.name, sub.name) == ("add", "sub")
