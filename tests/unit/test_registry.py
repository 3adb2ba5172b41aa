"""Tool discovery: a module dropped in `tools/` is live; toggles hide tools; typos fail loudly."""

from __future__ import annotations

import pytest

from bicameral.tools.registry import ToolRegistry, discover_tools

FIRST_TOOLS = {"send_message", "reply_to_message", "edit_message", "delete_message", "react", "current_time"}


def test_the_first_tools_are_discovered():
    names = {tool.name for tool in discover_tools()}
    assert FIRST_TOOLS <= names


def test_every_tool_has_a_description_and_an_object_schema():
    for spec in ToolRegistry(discover_tools()).specs():
        assert spec.description.strip(), spec.name
        assert spec.input_schema.get("type") == "object", spec.name


def test_disabled_tools_are_hidden():
    registry = ToolRegistry(discover_tools(), disabled=["react"])
    assert "react" not in registry.names()
    assert "react" not in {s.name for s in registry.specs()}


def test_disabling_an_unknown_tool_is_an_error_listing_the_real_ones():
    with pytest.raises(ValueError, match="send_message"):
        ToolRegistry(discover_tools(), disabled=["sned_message"])


def test_the_back_chamber_view_excludes_messaging_tools():
    back = ToolRegistry(discover_tools()).subset(exclude_messaging=True)
    assert "send_message" not in back.names()
    assert "current_time" in back.names()
