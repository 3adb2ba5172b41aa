"""`render_html` and `render_latex`: a page or a formula drawn by the offline Chromium, sent to the chat as a photo."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from bicameral.browser.chromium import Chromium
from bicameral.browser.render import Renderer, RenderFailed
from bicameral.folders import safe_name
from bicameral.sandbox.beneath import create_new, folder
from bicameral.sandbox.paths import lone_surrogate
from bicameral.sandbox.workspace import workspace_for
from bicameral.threads import in_tool_thread
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.files import send_workspace_file

RENDERS = "renders"
MAX_HTML_CHARS = 200_000
MAX_LATEX_CHARS = 5_000
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


class HtmlArgs(BaseModel):
    html: str = Field(min_length=1, max_length=MAX_HTML_CHARS, description="The page: a fragment or a whole document.")
    width: int = Field(default=800, ge=320, le=1200, description="Page width in CSS pixels.")
    height: int = Field(default=600, ge=100, le=2000, description="The least height; a longer page is taken whole.")
    title: str | None = Field(default=None, max_length=200, description="A short caption, also the file's name.")


class LatexArgs(BaseModel):
    latex: str = Field(min_length=1, max_length=MAX_LATEX_CHARS, description="The formula, without $ delimiters.")
    display: bool = Field(default=True, description="Display style (large, centred); false for inline style.")
    title: str | None = Field(default=None, max_length=200, description="A short caption, also the file's name.")


class RenderHtml(Tool[HtmlArgs]):
    name = "render_html"
    description = (
        "Draw HTML as a PNG and send it to the chat as a photo (kept in the workspace under renders/): for tables, "
        "timelines, diagrams and charts that read better as a picture. The page has no network: inline all CSS, JS "
        'and data. A house style is loaded: <table class="data"> (td.num for figures); '
        '<ol class="timeline"><li class="done|now|late"><time>when</time><b>title</b> text</li></ol>; '
        '<div class="diagram"><div class="node">A</div><div class="arrow">uses</div>'
        '<div class="node accent">B</div></div> (rows in <div class="stack">); .good .bad .warn .note .muted.'
    )
    args_model = HtmlArgs
    # It reads no file of the user's and reaches no network, so everyone allowed to talk may use it.
    owner_only = False
    acts_outside = False

    def __init__(self, renderer: Renderer | None = None) -> None:
        self.renderer = renderer or Renderer(Chromium())

    async def run(self, args: HtmlArgs, ctx: ToolContext) -> ToolResult:
        if problem := lone_surrogate("html", args.html) or (args.title and lone_surrogate("title", args.title)):
            return ToolResult.error(f"not rendered: {problem}")
        try:
            rendered = await self.renderer.html(args.html, width=args.width, height=args.height)
        except RenderFailed as exc:
            return ToolResult.error(str(exc))
        result = await _save_and_send(ctx, rendered.png, args.title or "page", args.title)
        if rendered.clipped and not result.is_error:
            limit = self.renderer.limits.max_height
            return ToolResult(f"{result.content}; the page was cut at {limit} pixels high: split it to show the rest")
        return result

    async def aclose(self) -> None:
        await self.renderer.chromium.aclose()


class RenderLatex(Tool[LatexArgs]):
    name = "render_latex"
    description = (
        "Typeset a LaTeX formula with KaTeX and send it to the chat as a photo (kept under renders/). Math only, "
        "without $ delimiters (\\frac{a}{b}, \\begin{aligned}...\\end{aligned}); an error comes back to fix."
    )
    args_model = LatexArgs
    owner_only = False
    acts_outside = False

    def __init__(self, renderer: Renderer | None = None) -> None:
        self.renderer = renderer or Renderer(Chromium())

    async def run(self, args: LatexArgs, ctx: ToolContext) -> ToolResult:
        if problem := lone_surrogate("latex", args.latex) or (args.title and lone_surrogate("title", args.title)):
            return ToolResult.error(f"not rendered: {problem}")
        try:
            rendered = await self.renderer.latex(args.latex, display=args.display)
        except RenderFailed as exc:
            return ToolResult.error(str(exc))
        if rendered.probe:
            return ToolResult.error(f"KaTeX could not typeset it: {str(rendered.probe)[:500]}")
        if not rendered.png:
            return ToolResult.error("KaTeX typeset nothing: the formula is empty")
        return await _save_and_send(ctx, rendered.png, args.title or "formula", args.title)

    async def aclose(self) -> None:
        await self.renderer.chromium.aclose()


async def _save_and_send(ctx: ToolContext, png: bytes, name: str, caption: str | None) -> ToolResult:
    given = await in_tool_thread(ctx.chat, save_render, ctx.data_dir, ctx.chat, png, name, ctx.now())
    return await send_workspace_file(ctx, given, caption)


def save_render(data_dir: Path, chat: str, png: bytes, name: str, now: datetime) -> str:
    """Write the picture as a new file `renders/<time>-<slug>.png` in the chat's workspace; its workspace path."""
    slug = _NOT_SLUG.sub("-", name.lower()).strip("-")[:40].strip("-") or "render"
    stem = safe_name(f"{now:%Y%m%d-%H%M%S}-{slug}")
    root = workspace_for(data_dir, chat).resolve()
    with folder(root, (RENDERS,), make=True) as renders:
        for n in range(100):
            file_name = f"{stem}-{n}.png" if n else f"{stem}.png"
            try:
                fd = create_new(renders, file_name)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as out:
                out.write(png)
            return f"{RENDERS}/{file_name}"
    raise FileExistsError(f"{stem}.png and 99 numbered copies of it are already in {RENDERS}/")
