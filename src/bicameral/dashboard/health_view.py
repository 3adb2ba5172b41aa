"""The skills-and-plugins page and the refused-senders page, read from what /audit reads (its sources: what did not
load at start, the skills' problems, the gate's refusals), plus the skills on offer and plugins.json as it stands."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from bicameral.console.audit import AuditSources
from bicameral.console.times import ago
from bicameral.errors import PluginsError
from bicameral.mcp.plugins import load_plugins
from bicameral.store.skills import Skill

REFUSED_SHOWN = 200
NOT_YET = "<p>Not known yet: the assistant is still starting.</p>"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + f"</tr>{cells}</table>"


def skills_body(skills: Sequence[Skill], plugins_path: Path | None, audit: AuditSources | None) -> str:
    """The skills on offer; plugins.json's MCP servers and settings; then, as /audit lists them, what did not load
    (tools, plugins and skills left out, and why)."""
    offered = (_table(("skill", "from", "what it does"), [(s.name, s.origin, s.description) for s in skills])
               if skills else "<p>No skills.</p>")
    plugins = _plugins(plugins_path)
    if audit is None:
        health = NOT_YET
    else:
        left_out = [audit.redact(line) for line in audit.not_loaded()]
        health = ("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in left_out) + "</ul>" if left_out
                  else "<p>Everything loaded.</p>")
    return (f"<section><h2>Skills</h2>{offered}</section><section><h2>Plugins (plugins.json)</h2>{plugins}</section>"
            f"<section><h2>Did not load (as /audit says)</h2>{health}</section>")


def _plugins(path: Path | None) -> str:
    if path is None:
        return "<p>No plugins file.</p>"
    try:
        config = load_plugins(path)
    except PluginsError as exc:
        return f"<p>{escape(str(exc))}</p>"
    servers = [str(entry.get("name", "?")) if isinstance(entry, dict) else "?" for entry in config.mcps]
    rows = [
        ("MCP servers", ", ".join(servers) or "none"),
        ("Claude Code tool groups on", ", ".join(config.tool_groups.unlocked()) or "none"),
        ("built-in tools hidden", ", ".join(config.builtin_tools_disabled) or "none"),
        ("tools that ask the owner first", ", ".join(config.ask_before) or "none"),
        ("skills hidden", ", ".join(config.skills_disabled) or "none"),
    ]
    return f"<p>{escape(str(path))}{'' if path.exists() else ' (absent: the defaults)'}</p>" + _table(("", ""), rows)


def refused_body(audit: AuditSources | None) -> str:
    """Who the gate refused, newest first, as /audit names them: who, where, how often, when; never what they wrote."""
    if audit is None:
        return NOT_YET
    now = audit.clock()
    refused, chats = audit.unauthorized.refused_lately(REFUSED_SHOWN)
    if not refused:
        return "<p>Nobody was refused.</p>"
    rows = [(sender.title or "private chat", sender.chat,
             f"{sender.sender_name or 'someone'} (id {sender.sender_id})", str(sender.count),
             ago(sender.first_at, now), ago(sender.last_at, now)) for sender in refused]
    more = f"<p>And {chats - len(refused)} more chats.</p>" if chats > len(refused) else ""
    return ("<p>access.json decides who may talk to the assistant; /allow in the chat lets one in.</p>"
            + _table(("chat", "id", "last sender", "messages", "first", "last"), rows) + more)
