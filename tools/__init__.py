"""Authoring tools: `@tool`, the registry by category, and the built-in toolsets."""

from loopstate.engine.tool import Tool, ToolContext
from loopstate.tools.decorator import tool
from loopstate.tools.registry import ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolRegistry", "tool"]
