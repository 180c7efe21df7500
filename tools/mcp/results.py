"""An MCP tool's result as the text the model sees: what the server gave, block by block.

Text as is; structured content as JSON (the SDK has checked it against the tool's output
schema); an image or audio block, which a tool message cannot carry, as a note of its type and
size; an embedded text resource as its text under its URI; a resource link as its URI. A result
flagged `isError` raises `MCPToolError`: the model is told the call failed, and why.
"""

from __future__ import annotations

import base64
import binascii
import json

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from loopstate.engine.errors import LoopstateError


class MCPToolError(LoopstateError):
    """An MCP tool answered with `isError`, or its server failed or vanished during the call."""


def result_text(result: CallToolResult) -> str:
    """The model's view of `result`; raises `MCPToolError` for an `isError` result."""
    parts = [block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None:
        shown = json.dumps(structured, ensure_ascii=False, sort_keys=True)
        if not any(_same_json(part, structured) for part in parts):
            parts.append(shown)
    text = "\n".join(parts)
    if result.is_error:
        raise MCPToolError(text or "the tool reported an error and said nothing more")
    return text


def block_text(block: ContentBlock) -> str:
    match block:
        case TextContent():
            return block.text
        case ImageContent() | AudioContent():
            kind = "image" if isinstance(block, ImageContent) else "audio"
            return f"[{kind} {block.mime_type}, {_size(block.data)} bytes]"
        case EmbeddedResource(resource=TextResourceContents() as res):
            return f"[resource {res.uri}]\n{res.text}"
        case EmbeddedResource(resource=BlobResourceContents() as res):
            return f"[resource {res.uri} {res.mime_type or 'binary'}, {_size(res.blob)} bytes]"
        case ResourceLink():
            about = f": {block.description}" if block.description else ""
            return f"[resource link {block.uri} ({block.name}){about}]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)


def _same_json(text: str, value: object) -> bool:
    """Whether a text block is the structured content itself: servers mirror it as text, and
    wrap a plain return value as `{"result": value}`."""
    if isinstance(value, dict) and set(value) == {"result"} and value["result"] == text:
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
