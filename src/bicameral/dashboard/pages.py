"""The dashboard's HTML, rendered on the server (escaped values only); htmx and its SSE extension are vendored."""

from __future__ import annotations

from html import escape

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script src="/static/htmx.min.js"></script>
<script src="/static/sse.js"></script>
<style>
body {{ font: 15px/1.4 system-ui, sans-serif; margin: 1.5rem; max-width: 70rem; }}
#live {{ font: 13px/1.35 ui-monospace, monospace; white-space: pre-wrap; border: 1px solid #ccc; padding: .5rem;
         height: 70vh; overflow-y: auto; }}
header {{ display: flex; justify-content: space-between; align-items: center; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""


def live_page(bot_name: str, csrf: str) -> str:
    """Live turns: each transcript line (a message in, a reply out, a tool call, its result) appended as it happens."""
    body = f"""<header><h1>{escape(bot_name)}: live</h1>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="{escape(csrf)}">
<button type="submit">Log out</button></form></header>
<p>Messages in ([RX]), replies out ([TX]) and tool calls ([TOOL→], [TOOL✓], [TOOL✗]) as they happen.</p>
<div id="live" hx-ext="sse" sse-connect="/events" sse-swap="line" hx-swap="beforeend"></div>
"""
    return PAGE.format(title=f"{escape(bot_name)} dashboard", body=body)


def line_fragment(line: str) -> str:
    return f'<div class="line">{escape(line)}</div>'


def message_page(title: str, text: str) -> str:
    return PAGE.format(title=escape(title), body=f"<h1>{escape(title)}</h1><p>{escape(text)}</p>")
