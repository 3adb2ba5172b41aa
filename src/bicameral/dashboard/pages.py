"""The dashboard's HTML, rendered on the server (escaped values only); htmx and its SSE extension are vendored."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

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
#live, #messages {{ white-space: pre-wrap; border: 1px solid #ccc; padding: .5rem; height: 60vh; overflow-y: auto; }}
#live {{ font: 13px/1.35 ui-monospace, monospace; }}
.panes {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }}
textarea {{ width: 100%; box-sizing: border-box; }}
header {{ display: flex; justify-content: space-between; align-items: center; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""


def live_page(bot_name: str, csrf: str) -> str:
    """Live turns (each transcript line appended as it happens) and the web chat panel, both fed by one event stream."""
    body = f"""<header><h1>{escape(bot_name)}: live</h1>
<nav><a href="/status">Status</a> <a href="/memory">Memory</a> <a href="/schedules">Reminders</a>
<a href="/cost">Cost</a> <a href="/skills">Skills and plugins</a> <a href="/refused">Refused senders</a></nav>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="{escape(csrf)}">
<button type="submit">Log out</button></form></header>
<div hx-ext="sse" sse-connect="/events" class="panes">
<section><h2>Chat</h2>
<div id="messages" sse-swap="chat" hx-swap="beforeend"></div>
{chat_form(csrf)}
</section>
<section><h2>Live turns</h2>
<p>Messages in ([RX]), replies out ([TX]) and tool calls ([TOOL→], [TOOL✓], [TOOL✗]) as they happen.</p>
<div id="live" sse-swap="line" hx-swap="beforeend"></div>
</section>
</div>
"""
    return PAGE.format(title=f"{escape(bot_name)} dashboard", body=body)


def chat_form(csrf: str) -> str:
    """The chat box; a sent message swaps in a fresh, empty one (no script of our own runs on the page)."""
    return f"""<form id="say" hx-post="/chat" hx-swap="outerHTML">
<input type="hidden" name="csrf" value="{escape(csrf)}">
<textarea name="text" rows="3" required aria-label="Message"></textarea>
<button type="submit">Send</button></form>"""


def chat_fragment(who: str, text: str, key: str | None = None, *, edit: bool = False) -> str:
    """A chat bubble; with `key` (a message id of ours) it can later be replaced (`edit`: this one replaces it, an
    htmx out-of-band swap) or removed."""
    if key is None:
        return f'<div class="said"><b>{escape(who)}</b> {escape(text)}</div>'
    swap = ' hx-swap-oob="outerHTML"' if edit else ""
    return f'<div class="said" id="said-{escape(key)}"{swap}><b>{escape(who)}</b> {escape(text)}</div>'


def removed_fragment(key: str) -> str:
    """Takes a bubble off the page (a deleted message: the progress note once the answer comes)."""
    return f'<div id="said-{escape(key)}" hx-swap-oob="delete"></div>'


def line_fragment(line: str) -> str:
    return f'<div class="line">{escape(line)}</div>'


def message_page(title: str, text: str) -> str:
    return PAGE.format(title=escape(title), body=f"<h1>{escape(title)}</h1><p>{escape(text)}</p>")


def status_page(bot_name: str, sections: list[tuple[str, str]]) -> str:
    """/health, /audit and /cost as the owner would get them in a chat, one block each."""
    blocks = "".join(f"<section><h2>{escape(title)}</h2><pre>{escape(text)}</pre></section>" for title, text in sections)
    body = f'<header><h1>{escape(bot_name)}: status</h1><a href="/">Live</a></header>{blocks}'
    return PAGE.format(title=f"{escape(bot_name)} status", body=body)


def memory_page(bot_name: str, csrf: str, names: list[str], shown: tuple[str, str] | None, note: str = "") -> str:
    """The memory files by name, each a link; the chosen one's text in a form to save or delete it."""
    links = "".join(f'<li><a href="/memory?name={quote(name)}">{escape(name)}</a></li>' for name in names)
    chosen = ""
    if shown is not None:
        name, token = escape(shown[0]), escape(csrf)
        chosen = f"""<h2>{name}</h2>
<form method="post" action="/memory/save"><input type="hidden" name="csrf" value="{token}">
<input type="hidden" name="name" value="{name}">
<textarea name="text" rows="20" aria-label="Text of {name}">{escape(shown[1])}</textarea>
<button type="submit">Save</button></form>
<form method="post" action="/memory/delete"><input type="hidden" name="csrf" value="{token}">
<input type="hidden" name="name" value="{name}"><button type="submit">Delete {name}</button></form>"""
    said = f'<p role="status">{escape(note)}</p>' if note else ""
    body = (f'<header><h1>{escape(bot_name)}: memory</h1><a href="/">Live</a></header>{said}'
            f"<ul>{links or '<li>no memory files yet</li>'}</ul>{chosen}")
    return PAGE.format(title=f"{escape(bot_name)} memory", body=body)


def titled_page(bot_name: str, title: str, body: str) -> str:
    """A page of its own under the dashboard's header (`body`: HTML already escaped)."""
    head = f'<header><h1>{escape(bot_name)}: {escape(title)}</h1><a href="/">Live</a></header>'
    return PAGE.format(title=f"{escape(bot_name)} {escape(title)}", body=head + body)


def schedules_page(bot_name: str, rows: list[tuple[str, str, str, str]]) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    table = ("<table><tr><th>next</th><th>chat</th><th>kind</th><th>what</th></tr>" + cells + "</table>"
             if rows else "<p>No reminders or scheduled tasks.</p>")
    body = f'<header><h1>{escape(bot_name)}: reminders and schedules</h1><a href="/">Live</a></header>{table}'
    return PAGE.format(title=f"{escape(bot_name)} reminders", body=body)
