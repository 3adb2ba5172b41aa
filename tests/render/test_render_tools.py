"""The render tools' edges: left out with the reason where Chromium is missing, open to members, oversized input
refused before any browser starts, and pictures saved as new files under renders/."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bicameral.app.configs import tools_for
from bicameral.browser.chromium import Chromium
from bicameral.browser.render import Renderer
from bicameral.config import Settings
from bicameral.events import Action, ActionResult, Authority, Role
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry
from bicameral.tools.render import MAX_HTML_CHARS, MAX_LATEX_CHARS, RenderHtml, RenderLatex, save_render


def _ctx(tmp_path: Path, sent: list[Action]) -> ToolContext:
    async def perform(action: Action) -> ActionResult:
        sent.append(action)
        return ActionResult(ok=True, message_ids=["9"])

    return ToolContext(
        chat="telegram:7", turn_id="t1", data_dir=tmp_path, perform=perform, authority=Authority.of(Role.MEMBER, ["telegram:7"])
    )


async def test_without_chromium_the_tools_are_left_out_with_the_reason(tmp_path: Path) -> None:
    settings = Settings.for_test(tmp_path, chromium_path=tmp_path / "no-chromium")
    left_out: list[str] = []
    names = {tool.name for tool in await tools_for(settings, left_out)}
    assert not names & {"render_html", "render_latex"}
    assert any(line.startswith("render_html and render_latex are off: Chromium is not installed at") for line in left_out)


async def test_oversized_input_is_refused_before_any_browser_starts(tmp_path: Path) -> None:
    chromium = Chromium(tmp_path / "never-started")
    renderer = Renderer(chromium)
    registry = ToolRegistry([RenderHtml(renderer), RenderLatex(renderer)])
    sent: list[Action] = []
    html = await registry.execute("render_html", {"html": "x" * (MAX_HTML_CHARS + 1)}, _ctx(tmp_path, sent))
    latex = await registry.execute("render_latex", {"latex": "x" * (MAX_LATEX_CHARS + 1)}, _ctx(tmp_path, sent))
    wide = await registry.execute("render_html", {"html": "<p>x</p>", "width": 5000}, _ctx(tmp_path, sent))
    assert html.is_error and latex.is_error and wide.is_error
    assert "at most" in html.content and "at most" in latex.content and "1200" in wide.content
    assert chromium.launches == 0 and sent == []


async def test_a_member_may_render(chromium: Chromium, tmp_path: Path) -> None:
    registry = ToolRegistry([RenderLatex(Renderer(chromium))])
    sent: list[Action] = []
    result = await registry.execute("render_latex", {"latex": "a^2+b^2=c^2", "title": "Pythagoras"}, _ctx(tmp_path, sent))
    assert not result.is_error, result.content
    [photo] = sent
    assert getattr(photo, "kind", None) == "photo" and getattr(photo, "caption", None) == "Pythagoras"


def test_renders_are_new_files_never_written_through_a_link(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = save_render(tmp_path, "telegram:7", b"one", "Sales / Q1 ../../x", now)
    second = save_render(tmp_path, "telegram:7", b"two", "Sales / Q1 ../../x", now)
    assert first == "renders/20260102-030405-sales-q1-x.png"
    assert second == "renders/20260102-030405-sales-q1-x-1.png"
    workspace = tmp_path / "workspaces" / "telegram_7"
    outside = tmp_path / "outside.png"
    (workspace / "renders" / "20260102-030405-sales-q1-x-2.png").symlink_to(outside)
    third = save_render(tmp_path, "telegram:7", b"three", "Sales / Q1 ../../x", now)
    assert third.endswith("-3.png") and not outside.exists()
    assert (workspace / first).read_bytes() == b"one"
