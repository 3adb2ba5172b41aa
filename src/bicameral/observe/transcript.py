"""The tagged transcript log: [RX] [TX] [DROP] [TOOL→] [TOOL✓] [TOOL✗], one line each."""

from __future__ import annotations

import json
import logging

log = logging.getLogger("bicameral.tx")
_PREVIEW = 160


def rx(chat: str, sender: str, message_id: str, text: str, *, edit: bool = False) -> None:
    log.info("%s %s %s m%s | %s", "[RX↺]" if edit else "[RX]", chat, sender, message_id, _preview(text))


def drop(chat: str, sender: str, reason: str) -> None:
    log.info("[DROP] %s %s | %s", chat, sender, reason)


def tx(chat: str, message_ids: tuple[str, ...], text: str) -> None:
    log.info("[TX] %s m%s | %s", chat, ",".join(message_ids) or "?", _preview(text))


def tx_failed(chat: str, error: str) -> None:
    log.warning("[TX✗] %s | %s", chat, _preview(error))


def action(tag: str, chat: str, detail: str) -> None:
    log.info("[%s] %s | %s", tag, chat, _preview(detail))


def tool_call(chat: str, name: str, args: object) -> None:
    log.info("[TOOL→] %s %s(%s)", chat, name, _preview(json.dumps(args, ensure_ascii=False, default=str)))


def tool_ok(chat: str, name: str, result: str, duration_ms: float) -> None:
    log.info("[TOOL✓] %s %s %.0fms | %s", chat, name, duration_ms, _preview(result))


def tool_error(chat: str, name: str, error: str, duration_ms: float) -> None:
    log.warning("[TOOL✗] %s %s %.0fms | %s", chat, name, duration_ms, _preview(error))


def _preview(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
