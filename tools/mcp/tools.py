"""An MCP server's tool as a loopstate `Tool`, and one call of it over the 2026-07-28
protocol: rounds of `input_required` answered through `ctx.ask`, so a server's question is a
durable wait like any tool's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema
from mcp import ClientSession
from mcp.types import CallToolResult, ElicitRequest, ElicitRequestFormParams, ElicitResult
from mcp.types import Tool as MCPToolInfo
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from loopstate.engine.tool import Tool, ToolContext
from loopstate.tools.mcp.gating import gate, idempotent, needs_approval
from loopstate.tools.mcp.results import MCPToolError, result_text

if TYPE_CHECKING:
    from loopstate.tools.mcp.server import MCPServer

MAX_ROUNDS = 10
"""How many times one call may come back asking for input before it is given up."""


class MCPArguments(BaseModel):
    """A call's arguments, checked against the server's JSON schema (not a pydantic model)."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass(frozen=True)
class MCPTool(Tool):
    """A tool of an MCP server: its schema is the server's, its body a call to the server."""

    server: MCPServer | None = field(default=None, repr=False)
    remote: str = ""
    """The tool's name on the server."""
    mcp: MCPToolInfo | None = field(default=None, repr=False)

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        errors = list(jsonschema.Draft202012Validator(self.parameters or {}).iter_errors(arguments))
        if errors:
            raise ValidationError.from_exception_data(self.name, [_detail(e) for e in errors])
        return MCPArguments.model_validate(arguments)

    async def invoke(self, args: BaseModel, ctx: ToolContext[Any]) -> str:
        assert self.server is not None
        return await self.server.call(self.remote, args.model_dump(), ctx)


def _detail(error: jsonschema.ValidationError) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError("mcp_schema", "{reason}", {"reason": error.message}),
        loc=tuple(error.absolute_path),
        input=error.instance,
    )


def build_tool(server: MCPServer, info: MCPToolInfo, name: str) -> MCPTool:
    gated, why = needs_approval(info, server.needs_approval)
    approval: Any = False
    if gated:
        verdict = gate(server.name, info, name, why)
        approval = lambda args, ctx: verdict  # noqa: E731 - the same gate for every call
    schema = {k: v for k, v in info.input_schema.items() if k != "title"}
    return MCPTool(
        name=name,
        description=info.description or info.title or name,
        args_model=MCPArguments,
        fn=server.call,
        needs_approval=approval,
        timeout=None,  # the server's `timeout` bounds the call, not its start (see `call`)
        category="mcp",
        idempotent=idempotent(info),
        is_async=True,
        asks=True,  # a server may ask its user a question during any call
        parameters=schema,
        server=server,
        remote=info.name,
        mcp=info,
    )


async def call_rounds(
    session: ClientSession, remote: str, arguments: dict[str, Any], ctx: ToolContext[Any]
) -> str:
    """Call `remote` until the server gives its result, answering its questions with
    `ctx.ask`: an unanswered one suspends the run; once answered, the call starts again from
    its first round (the server asks again and gets the recorded answer at once), so it works
    whether or not the server kept its state across the wait."""
    responses: dict[str, Any] | None = None
    state: str | None = None
    for _ in range(MAX_ROUNDS):
        result = await session.call_tool(
            remote, arguments, input_responses=responses, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
        if isinstance(result, CallToolResult):
            return result_text(result)
        responses = {
            key: await _answer(req, ctx) for key, req in (result.input_requests or {}).items()
        }
        state = result.request_state
    raise MCPToolError(f"the server asked for input more than {MAX_ROUNDS} times in one call")


async def _answer(request: Any, ctx: ToolContext[Any]) -> ElicitResult:
    if not (
        isinstance(request, ElicitRequest) and isinstance(request.params, ElicitRequestFormParams)
    ):
        kind = getattr(request, "method", type(request).__name__)
        raise MCPToolError(f"the server asked for {kind}, which loopstate does not provide")
    params = request.params
    answer = await ctx.ask(params.message, schema=dict(params.requested_schema))
    return ElicitResult(action="accept", content=answer)
