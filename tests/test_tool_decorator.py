"""`@tool`: schemas, descriptions, context, options, registry."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from loopstate import DefinitionError, ToolContext, ToolRegistry, tool


def ctx() -> ToolContext[None]:
    return ToolContext(run_id="r", call_id="c", tool="t", deps=None)


def test_the_schema_comes_from_the_signature_and_the_description_from_the_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10, mode: Literal["fast", "deep"] = "fast") -> str:
        """Search the index.

        Longer explanation.

        Args:
            query: what to look for
            limit: at most this many hits
        """
        return query

    d = search.definition
    assert d.name == "search"
    assert d.description == "Search the index.\n\nLonger explanation."
    assert d.parameters["required"] == ["query"]
    assert d.parameters["additionalProperties"] is False
    props = d.parameters["properties"]
    assert props["query"]["description"] == "what to look for"
    assert props["limit"] == {
        "default": 10,
        "description": "at most this many hits",
        "title": "Limit",
        "type": "integer",
    }
    assert props["mode"]["enum"] == ["fast", "deep"]


def test_a_tool_context_parameter_is_hidden_from_the_model() -> None:
    @tool
    async def whoami(ctx: ToolContext[None], loud: bool = False) -> str:
        """Who runs this."""
        return ctx.run_id

    assert list(whoami.definition.parameters["properties"]) == ["loud"]
    assert whoami.context_param == "ctx"


async def test_sync_and_async_tools_are_invoked_with_validated_arguments() -> None:
    class Point(BaseModel):
        x: int
        y: int

    @tool
    def double(p: Point) -> Point:
        """Doubles a point."""
        return Point(x=p.x * 2, y=p.y * 2)

    @tool
    async def where(ctx: ToolContext[None]) -> dict[str, str]:
        """Where am I."""
        return {"run": ctx.run_id, "call": ctx.call_id}

    assert await double.invoke(double.validate({"p": {"x": 1, "y": 2}}), ctx()) == '{"x":2,"y":4}'
    assert await where.invoke(where.validate({}), ctx()) == '{"run": "r", "call": "c"}'
    with pytest.raises(ValidationError):
        double.validate({"p": {"x": "one"}})


def test_options_are_recorded_on_the_tool() -> None:
    @tool(needs_approval=True, timeout=2.5, retries=1, category="editing", idempotent=True)
    def put(key: str) -> str:
        """Put."""
        return key

    assert (put.needs_approval, put.timeout, put.retries, put.category, put.idempotent) == (
        True,
        2.5,
        1,
        "editing",
        True,
    )


def test_an_approval_predicate_sees_the_validated_arguments_and_optionally_the_context() -> None:
    @tool(needs_approval=lambda args: args.amount >= 100)
    def pay(amount: int) -> str:
        """Pay."""
        return "ok"

    @tool(needs_approval=lambda args, c: c.run_id == "prod")
    def deploy() -> str:
        """Deploy."""
        return "ok"

    assert pay.gated(pay.validate({"amount": 100}), ctx()) is True
    assert pay.gated(pay.validate({"amount": 99}), ctx()) is False
    assert deploy.gated(deploy.validate({}), ctx()) is False


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "has space"}, "must match"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"retries": -1}, "retries must be >= 0"),
        ({"needs_approval": lambda: True}, "takes \\(arguments\\)"),
    ],
)
def test_a_wrongly_declared_tool_fails_at_definition(
    options: dict[str, object], message: str
) -> None:
    def f() -> str:
        """F."""
        return ""

    with pytest.raises(DefinitionError, match=message):
        tool(**options)(f)  # type: ignore[call-overload]


def test_star_args_are_refused() -> None:
    def f(*args: int) -> str:
        """F."""
        return ""

    with pytest.raises(DefinitionError, match=r"\*args"):
        tool(f)


def test_the_registry_groups_tools_by_category_and_refuses_duplicates() -> None:
    @tool(category="read_only")
    def a() -> str:
        """A."""
        return ""

    @tool(category="editing")
    def b() -> str:
        """B."""
        return ""

    registry = ToolRegistry([a, b])
    assert [t.name for t in registry.category("read_only")] == ["a"]
    assert [t.name for t in registry.select("b", "a")] == ["b", "a"]
    assert registry.categories == {"read_only", "editing"}
    with pytest.raises(DefinitionError, match="two tools are named 'a'"):
        registry.add(a)
    with pytest.raises(DefinitionError, match="no tools in categories"):
        registry.category("web")
    with pytest.raises(DefinitionError, match="not a Tool"):
        ToolRegistry([lambda: None])  # type: ignore[list-item]
