"""A fake Telegram Bot API server speaking the real HTTP wire format, for tests.

The server runs aiohttp in its own thread and event loop, so sync tests, async
tests and bot subprocesses can all talk to it. Point python-telegram-bot at it with
``Bot(token, base_url=f"{fake.url}/bot", base_file_url=f"{fake.url}/file/bot")``.

Every public method is thread-safe: shared state lives behind one lock, and
long-polling ``getUpdates`` requests are woken via ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import mimetypes
import re
import secrets
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["ApiError", "Call", "FakeTelegram", "UploadedFile"]

log = logging.getLogger(__name__)

MAX_MESSAGE_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
FIRST_UPDATE_ID = 100_000
DEFAULT_GROUP_USER_ID = 777_000_001
CONFLICT_DESCRIPTION = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)

_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: CONFLICT_DESCRIPTION,
    500: "Internal Server Error",
    502: "Bad Gateway",
}

# The emoji Telegram accepts for ReactionTypeEmoji (per the Bot API docs).
ALLOWED_REACTIONS = frozenset(
    "❤ 👍 👎 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 "
    "💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡".split()
)

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)


# --------------------------------------------------------------------------- data types


@dataclass
class Call:
    """One HTTP request the bot made to the fake (API method or file download)."""

    method: str
    params: dict[str, Any]
    ts: float
    status: int | None = None
    response: dict[str, Any] | None = None
    client_port: int | None = None  # the bot's end of the connection: which process sent it, when several share a fake


@dataclass(frozen=True)
class UploadedFile:
    """A file part received in a multipart request."""

    filename: str | None
    content_type: str | None
    data: bytes


class ApiError(Exception):
    """A Bot API error response; raise it from custom handlers registered with register_method."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        """Return the Telegram JSON error body."""
        body: dict[str, Any] = {"ok": False, "error_code": self.status, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: int | None
    times: int
    after: int = 0  # calls let through before the first failure


@dataclass
class _StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes
    file_name: str | None = None
    mime_type: str | None = None


@dataclass
class _SentRecord:
    method: str
    params: dict[str, Any]
    message: dict[str, Any]  # the live history dict, so edits show up in place
    deleted: bool = False
    edits: list[str] = field(default_factory=list)
    file_bytes: bytes | None = None


def _bad(description: str) -> ApiError:
    """Build a 400 error with Telegram's "Bad Request: " prefix."""
    return ApiError(400, f"Bad Request: {description}")


# --------------------------------------------------------------------------- param coercion


def _utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram uses for entity offsets."""
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, index: int) -> int:
    """UTF-8 byte offset of a character index, as Telegram reports in parse errors."""
    return len(text[:index].encode())


def _opt_int(params: dict[str, Any], key: str) -> int | None:
    """Read an optional integer param from a form string or a JSON number."""
    value = params.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or isinstance(value, UploadedFile):
        raise _bad(f"invalid {key} specified")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(f"invalid {key} specified") from None


def _opt_bool(params: dict[str, Any], key: str) -> bool:
    """Read an optional boolean param ("true"/"false" in forms, JSON bool otherwise)."""
    value = params.get(key)
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1"}
    return bool(value)


def _opt_str(params: dict[str, Any], key: str) -> str | None:
    """Read an optional string param."""
    value = params.get(key)
    if value is None or isinstance(value, UploadedFile):
        return None
    return value if isinstance(value, str) else str(value)


def _scope_key(params: dict[str, Any]) -> str:
    """A setMyCommands scope as canonical JSON; none given is the default scope."""
    scope = _opt_json(params, "scope") or {"type": "default"}
    return json.dumps(scope, sort_keys=True)


def _opt_json(params: dict[str, Any], key: str) -> Any:
    """Read a param that holds a JSON object; forms carry it as a JSON string."""
    value = params.get(key)
    if isinstance(value, str):
        if value == "":
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise _bad(f"can't parse {key} JSON object") from None
    return value


def _message_id(params: dict[str, Any]) -> int:
    """Read the mandatory message_id param."""
    message_id = _opt_int(params, "message_id")
    if message_id is None:
        raise _bad("message identifier is not specified")
    return message_id


# --------------------------------------------------------------------------- formatting


_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)([^<>]*)>")
_ATTR_RE = re.compile(r"""([A-Za-z_:][A-Za-z0-9_:.-]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")
_HTML_ENTITY_RE = re.compile(r"&(lt|gt|amp|quot|#[0-9]+|#[xX][0-9a-fA-F]+);")
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_HTML_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}


def _entity_error(detail: str) -> ApiError:
    """Build the 400 Telegram returns for malformed markup."""
    return _bad(f"can't parse entities: {detail}")


def _html_unescape(chunk: str) -> str:
    """Decode only the HTML entities Telegram supports (4 named + numeric)."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _HTML_NAMED:
            return _HTML_NAMED[name]
        code = int(name[2:], 16) if name[1:2] in {"x", "X"} else int(name[1:])
        return chr(code)

    return _HTML_ENTITY_RE.sub(repl, chunk)


@dataclass
class _OpenTag:
    name: str
    attrs: dict[str, str]
    start: int  # UTF-16 offset in the output text
    language: str | None = None


def _parse_attrs(raw: str) -> dict[str, str]:
    """Parse tag attributes; bare attributes map to an empty string."""
    attrs: dict[str, str] = {}
    for match in _ATTR_RE.finditer(raw):
        value = next((g for g in match.groups()[1:] if g is not None), "")
        attrs[match.group(1).lower()] = _html_unescape(value)
    return attrs


def _close_html_entity(tag: _OpenTag, end: int, stack: list[_OpenTag]) -> dict[str, Any] | None:
    """Turn a closed tag into a MessageEntity dict (None when Telegram would drop it)."""
    if tag.name == "code" and stack and stack[-1].name == "pre":
        # <pre><code class="language-x"> sets the pre block's language instead of a code entity.
        cls = tag.attrs.get("class", "")
        if cls.startswith("language-"):
            stack[-1].language = cls.removeprefix("language-")
            return None
    length = end - tag.start
    if length <= 0:
        return None
    entity: dict[str, Any] = {"type": _HTML_TAGS[tag.name], "offset": tag.start, "length": length}
    if tag.name == "a":
        href = tag.attrs.get("href")
        if not href:
            return None
        entity["url"] = href
    elif tag.name == "pre" and tag.language:
        entity["language"] = tag.language
    elif tag.name == "blockquote" and "expandable" in tag.attrs:
        entity["type"] = "expandable_blockquote"
    elif tag.name == "tg-emoji":
        entity["custom_emoji_id"] = tag.attrs["emoji-id"]
    return entity


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Render Telegram HTML to (plain text, entities), raising ApiError like Telegram on bad markup."""
    out: list[str] = []
    pos = 0
    stack: list[_OpenTag] = []
    entities: list[dict[str, Any]] = []
    i = 0
    while i < len(text):
        lt = text.find("<", i)
        chunk = _html_unescape(text[i : lt if lt >= 0 else len(text)])
        out.append(chunk)
        pos += _utf16_len(chunk)
        if lt < 0:
            break
        offset = _byte_offset(text, lt)
        match = _TAG_RE.match(text, lt)
        if match is None:
            raise _entity_error(f'Unsupported start tag "" at byte offset {offset}')
        closing, name, raw_attrs = match.group(1) == "/", match.group(2).lower(), match.group(3)
        if closing:
            if not stack:
                raise _entity_error(f"Unexpected end tag at byte offset {offset}")
            top = stack.pop()
            if top.name != name:
                raise _entity_error(
                    f'Unmatched end tag at byte offset {offset}, expected "</{top.name}>", found "</{name}>"'
                )
            if entity := _close_html_entity(top, pos, stack):
                entities.append(entity)
        else:
            if name not in _HTML_TAGS:
                raise _entity_error(f'Unsupported start tag "{name}" at byte offset {offset}')
            attrs = _parse_attrs(raw_attrs)
            if name == "span" and attrs.get("class") != "tg-spoiler":
                raise _entity_error(f'Tag "span" must have class "tg-spoiler" at byte offset {offset}')
            if name == "tg-emoji" and not attrs.get("emoji-id"):
                raise _entity_error(f'Tag "tg-emoji" must have attribute "emoji-id" at byte offset {offset}')
            stack.append(_OpenTag(name, attrs, pos))
        i = match.end()
    if stack:
        raise _entity_error(f'Can\'t find end tag corresponding to start tag "{stack[-1].name}"')
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(out), entities


_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_TOGGLES = {"||": "Spoiler", "__": "Underline", "*": "Bold", "_": "Italic", "~": "Strikethrough"}


def _find_unescaped(text: str, needle: str, start: int) -> int:
    """Index of needle at or after start, skipping backslash-escaped characters; -1 if absent."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1


def _md_unescape(chunk: str) -> str:
    """Drop MarkdownV2 escaping backslashes."""
    return re.sub(r"\\(.)", r"\1", chunk, flags=re.S)


def parse_markdown_v2(text: str) -> str:
    """Loosely validate MarkdownV2 like Telegram (reserved chars, unclosed markers) and return plain text."""
    out: list[str] = []
    open_markers: dict[str, int] = {}
    links: list[int] = []
    i = 0
    line_start = True
    while i < len(text):
        c = text[i]
        if c == "\\":
            out.append(text[i + 1 : i + 2])
            i, line_start = i + 2, False
            continue
        fence = "```" if text.startswith("```", i) else "`" if c == "`" else None
        if fence:
            end = _find_unescaped(text, fence, i + len(fence))
            if end < 0:
                kind = "Pre" if fence == "```" else "Code"
                raise _entity_error(f"Can't find end of {kind} entity at byte offset {_byte_offset(text, i)}")
            body = text[i + len(fence) : end]
            if fence == "```" and "\n" in body:
                body = body.split("\n", 1)[1]  # the first line names the language
            out.append(_md_unescape(body))
            i, line_start = end + len(fence), False
            continue
        marker = next((m for m in _MDV2_TOGGLES if text.startswith(m, i)), None)
        if marker:
            if marker in open_markers:
                del open_markers[marker]
            else:
                open_markers[marker] = i
            i, line_start = i + len(marker), False
            continue
        if c == "[":
            links.append(i)
            i, line_start = i + 1, False
            continue
        if c == "]" and links:
            links.pop()
            i += 1
            if text.startswith("(", i):
                end = _find_unescaped(text, ")", i + 1)
                if end < 0:
                    raise _entity_error(f"Can't find end of a URL at byte offset {_byte_offset(text, i)}")
                i = end + 1
            line_start = False
            continue
        if c == ">" and line_start:
            i += 1  # a blockquote marker
            continue
        if c in _MDV2_RESERVED:
            raise _entity_error(f"Character '{c}' is reserved and must be escaped with the preceding '\\'")
        out.append(c)
        line_start = c == "\n"
        i += 1
    if links:
        raise _entity_error("Character '[' is reserved and must be escaped with the preceding '\\'")
    if open_markers:
        marker, start = min(open_markers.items(), key=lambda kv: kv[1])
        name = _MDV2_TOGGLES[marker]
        raise _entity_error(f"Can't find end of {name} entity at byte offset {_byte_offset(text, start)}")
    return "".join(out)


def format_text(
    text: str, parse_mode: str | None, entities: list[dict[str, Any]] | None
) -> tuple[str, list[dict[str, Any]]]:
    """Apply parse_mode or explicit entities the way Telegram does, returning (text, entities)."""
    if entities is not None:
        return text, entities
    mode = (parse_mode or "").strip().lower()
    if not mode:
        return text, []
    if mode == "html":
        return parse_html(text)
    if mode == "markdownv2":
        return parse_markdown_v2(text), []
    if mode == "markdown":
        return text, []  # legacy Markdown is accepted without validation
    raise _bad("unsupported parse_mode")


_AUTO_ENTITY_RE = re.compile(
    r"(?P<bot_command>(?<!\S)/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?)"
    r"|(?P<mention>(?<![\w@])@[A-Za-z0-9_]{5,32})"
    r"|(?P<url>https?://[^\s]+)"
)


def auto_entities(text: str) -> list[dict[str, Any]]:
    """Detect the entities Telegram adds to incoming user text (commands, mentions, URLs)."""
    entities = []
    for match in _AUTO_ENTITY_RE.finditer(text):
        kind = match.lastgroup or "url"
        entities.append(
            {
                "type": kind,
                "offset": _utf16_len(text[: match.start()]),
                "length": _utf16_len(match.group()),
            }
        )
    return entities


def image_size(data: bytes) -> tuple[int, int]:
    """Best-effort (width, height) of PNG/JPEG bytes; a plausible default otherwise."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if data[:2] == b"\xff\xd8":
            i = 2
            while i + 9 < len(data):
                if data[i] != 0xFF:
                    i += 1
                    continue
                marker = data[i + 1]
                seg_len = struct.unpack(">H", data[i + 2 : i + 4])[0]
                if 0xC0 <= marker <= 0xCF and marker not in {0xC4, 0xC8, 0xCC}:
                    height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                    return int(width), int(height)
                i += 2 + seg_len
    except struct.error:
        pass
    return 640, 480


# --------------------------------------------------------------------------- the server


class FakeTelegram:
    """An in-process fake Telegram Bot API server on 127.0.0.1 with scripting and observation helpers."""

    def __init__(
        self,
        token: str = "123456:TEST",
        bot_id: int = 123456,
        bot_username: str = "bicameral_test_bot",
        bot_first_name: str = "Bicameral",
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.bot_username = bot_username
        self.bot_first_name = bot_first_name
        self.url = ""

        # RLock so helpers can nest; the Condition lets sync waiters sleep until a request completes.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)

        self._calls: list[Call] = []
        self._errors: list[BaseException] = []
        self._updates: list[dict[str, Any]] = []
        self._next_update_id = FIRST_UPDATE_ID
        self._acked_offset = 0
        self._poll_generation = 0
        self._polls_at_once = False

        self._chats: dict[int, dict[str, Any]] = {}
        self._next_message_id: dict[int, int] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._deleted: set[tuple[int, int]] = set()
        self._sent: list[_SentRecord] = []
        self._sent_by_key: dict[tuple[int, int], _SentRecord] = {}
        self._reactions: list[dict[str, Any]] = []
        self._files: dict[str, _StoredFile] = {}
        self._files_by_path: dict[str, _StoredFile] = {}
        self._file_counter = 0
        self._commands: dict[str, list[dict[str, Any]]] = {}  # per scope, as its canonical JSON
        self._presses: dict[str, dict[str, Any]] = {}  # callback query id -> the callback_query sent
        self._press_answers: dict[str, dict[str, Any]] = {}  # callback query id -> answerCallbackQuery's params

        self._failures: dict[str, list[_Failure]] = {}
        self._reject_entities: dict[str, int] = {}
        self._refuse_unseen_replies = False
        self._custom: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._holds: dict[tuple[str, str], threading.Event] = {}

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._updates_event: asyncio.Event | None = None
        self._stopping = False

        self._methods: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {}
        for name, handler in {
            "getMe": self._m_get_me,
            "getUpdates": self._m_get_updates,
            "sendMessage": self._m_send_message,
            "editMessageText": self._m_edit_message_text,
            "deleteMessage": self._m_delete_message,
            "deleteMessages": self._m_delete_messages,
            "setMessageReaction": self._m_set_message_reaction,
            "sendChatAction": self._m_send_chat_action,
            "sendPhoto": self._m_send_photo,
            "sendDocument": self._m_send_document,
            "getFile": self._m_get_file,
            "getChatMember": self._m_get_chat_member,
            "setMyCommands": self._m_set_my_commands,
            "getMyCommands": lambda p: self.commands_for(_scope_key(p)),
            "deleteMyCommands": self._m_delete_my_commands,
            "deleteWebhook": self._m_delete_webhook,
            "getWebhookInfo": self._m_get_webhook_info,
            "setMyDescription": lambda p: True,
            "setMyShortDescription": lambda p: True,
            "setMyName": lambda p: True,
            "setChatMenuButton": lambda p: True,
            "answerCallbackQuery": self._m_answer_callback_query,
            "close": lambda p: True,
            "logOut": lambda p: True,
        }.items():
            self._methods[name.lower()] = (name, handler)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> FakeTelegram:
        """Start serving on 127.0.0.1 at a random port in a background thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("FakeTelegram already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=self._run_loop, args=(loop,), name="FakeTelegram", daemon=True)
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._astart(), loop).result(timeout=10)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """Stop the server and its thread; pending long polls return an empty result first."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._stopping:
            return
        self._stopping = True
        try:
            asyncio.run_coroutine_threadsafe(self._astop(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        """Thread body: own the loop until stop() halts it."""
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _astart(self) -> int:
        self._updates_event = asyncio.Event()
        # Telegram accepts uploads far beyond aiohttp's 1 MiB default body limit.
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        app.router.add_route("*", "/{tail:.*}", self._handle_not_found)
        # handler_cancellation: a killed bot's abandoned long poll must not linger;
        # a short shutdown timeout keeps stop() fast.
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def _astop(self) -> None:
        self._wake_pollers()
        if self._runner is not None:
            await self._runner.cleanup()

    # ----------------------------------------------------------------- HTTP layer

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        """Merge query string and body (JSON, urlencoded or multipart) into one params dict."""
        params: dict[str, Any] = dict(request.query)
        if request.method == "GET" or not request.can_read_body:
            return params
        if request.content_type == "application/json":
            try:
                body = await request.json()
            except ValueError:
                raise _bad("can't parse JSON object") from None
            if not isinstance(body, dict):
                raise _bad("JSON body must be an object")
            params.update(body)
            return params
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = UploadedFile(value.filename, value.content_type, value.file.read())
            else:
                params[key] = value
        return params

    async def _handle_method(self, request: web.Request) -> web.Response:
        name = request.match_info["method"]
        known = self._methods.get(name.lower())
        with self._lock:
            custom_name = next((n for n in self._custom if n.lower() == name.lower()), None)
            custom_handler = self._custom.get(custom_name) if custom_name else None
        canonical = custom_name or (known[0] if known else name)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        call = Call(canonical, {}, time.monotonic(), client_port=peer[1] if peer else None)
        with self._lock:
            self._calls.append(call)
        try:
            call.params = await self._read_params(request)
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if known is None and custom_name is None:
                raise ApiError(404, "Not Found: method not found")
            await self._wait_while_held(canonical, call.params)
            self._raise_scripted_failure(canonical)
            handler = custom_handler or known[1]  # type: ignore[index]
            result = handler(call.params)
            if inspect.isawaitable(result):
                result = await result
            return self._finish(call, 200, {"ok": True, "result": result})
        except ApiError as exc:
            return self._finish(call, exc.status, exc.body())
        except Exception as exc:  # a bug in the fake: surface it to the client and to fake.errors
            log.exception("FakeTelegram handler for %s crashed", canonical)
            with self._lock:
                self._errors.append(exc)
            body = {"ok": False, "error_code": 500, "description": f"Internal Server Error: {exc!r}"}
            return self._finish(call, 500, body)

    def _finish(self, call: Call, status: int, body: dict[str, Any]) -> web.Response:
        """Record the outcome on the call, wake sync waiters, and build the response."""
        with self._cond:
            call.status = status
            call.response = body
            self._cond.notify_all()
        return web.json_response(body, status=status)

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        call = Call("downloadFile", {"file_path": path}, time.monotonic())
        with self._lock:
            self._calls.append(call)
            stored = self._files_by_path.get(path)
        if request.match_info["token"] != self.token:
            return self._finish(call, 401, ApiError(401, "Unauthorized").body())
        if stored is None:
            return self._finish(call, 404, ApiError(404, "Not Found").body())
        with self._cond:
            call.status = 200
            self._cond.notify_all()
        return web.Response(body=stored.data, content_type=stored.mime_type or "application/octet-stream")

    async def _handle_not_found(self, request: web.Request) -> web.Response:
        return web.json_response(ApiError(404, "Not Found").body(), status=404)

    def _raise_scripted_failure(self, method: str) -> None:
        """Consume one scripted failure for this method (or the "*" wildcard) and raise it."""
        with self._lock:
            for key in (method.lower(), "*"):
                queue = self._failures.get(key)
                if not queue:
                    continue
                failure = queue[0]
                if failure.after > 0:
                    failure.after -= 1
                    return
                failure.times -= 1
                if failure.times <= 0:
                    queue.pop(0)
                raise ApiError(failure.status, failure.description, failure.retry_after)

    async def _wait_while_held(self, method: str, params: dict[str, Any]) -> None:
        """A held (method, chat) answers only once the test releases it: a slow Telegram."""
        with self._lock:
            held = self._holds.get((method.lower(), str(params.get("chat_id"))))
        # The release comes from the test's thread, so poll the threading.Event.
        while held is not None and not held.is_set() and not self._stopping:  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    def _wake_pollers(self) -> None:
        """Wake every waiting getUpdates; must run on the server loop."""
        event = self._updates_event
        if event is not None:
            self._updates_event = asyncio.Event()
            event.set()

    def _notify_updates(self) -> None:
        """Wake long polls from any thread after the update queue changed."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake_pollers)
            except RuntimeError:  # loop closed between the check and the call
                pass

    # ----------------------------------------------------------------- state helpers (lock held)

    def _bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": self.bot_first_name, "username": self.bot_username}

    def _chat(self, chat_id: int) -> dict[str, Any]:
        """Known chat, or a plausible one synthesised from the id (Telegram would know it)."""
        chat = self._chats.get(chat_id)
        if chat is None:
            if chat_id > 0:
                chat = {"id": chat_id, "type": "private", "first_name": "User"}
            else:
                kind = "supergroup" if str(chat_id).startswith("-100") else "group"
                chat = {"id": chat_id, "type": kind, "title": "Chat"}
            self._chats[chat_id] = chat
        return chat

    def _chat_id(self, params: dict[str, Any]) -> int:
        """Resolve the chat_id param (numeric or @username) like Telegram."""
        raw = params.get("chat_id")
        if raw is None or raw == "":
            raise _bad("chat_id is empty")
        if isinstance(raw, str) and raw.startswith("@"):
            with self._lock:
                for chat in self._chats.values():
                    if chat.get("username", "").lower() == raw[1:].lower():
                        return int(chat["id"])
            raise _bad("chat not found")
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise _bad("chat not found") from None

    def _alloc_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _live_message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        key = (chat_id, message_id)
        if key in self._deleted:
            return None
        return self._messages.get(key)

    @staticmethod
    def _embed_reply(message: dict[str, Any]) -> dict[str, Any]:
        """Telegram nests the replied-to message one level deep only."""
        embedded = copy.deepcopy(message)
        embedded.pop("reply_to_message", None)
        return embedded

    def _enqueue(self, update: dict[str, Any]) -> int:
        with self._lock:
            update_id = update.get("update_id")
            if update_id is None:
                update_id = self._next_update_id
                update["update_id"] = update_id
            update_id = int(update_id)
            self._next_update_id = max(self._next_update_id, update_id + 1)
            self._updates.append(update)
        self._notify_updates()
        return update_id

    def _store_file(self, data: bytes, kind: str, file_name: str | None, mime_type: str | None) -> _StoredFile:
        with self._lock:
            self._file_counter += 1
            n = self._file_counter
            ext = ".jpg" if kind == "photos" else (mimetypes.guess_extension(mime_type or "") or "")
            if file_name and "." in file_name:
                ext = "." + file_name.rsplit(".", 1)[1]
            stored = _StoredFile(
                file_id=f"{kind[:3].upper()}{n:05d}-{secrets.token_hex(6)}",
                file_unique_id=f"U{n:05d}{secrets.token_hex(3)}",
                file_path=f"{kind}/file_{n}{ext}",
                data=data,
                file_name=file_name,
                mime_type=mime_type,
            )
            self._files[stored.file_id] = stored
            self._files_by_path[stored.file_path] = stored
            return stored

    def _photo_sizes(self, stored: _StoredFile) -> list[dict[str, Any]]:
        """Telegram sends several sizes; we offer a thumbnail alias plus the full image."""
        width, height = image_size(stored.data)
        scale = min(1.0, 90 / max(width, height, 1))
        thumb = self._store_file(stored.data, "photos", None, stored.mime_type)
        return [
            {
                "file_id": thumb.file_id,
                "file_unique_id": thumb.file_unique_id,
                "width": max(1, int(width * scale)),
                "height": max(1, int(height * scale)),
                "file_size": len(stored.data),
            },
            {
                "file_id": stored.file_id,
                "file_unique_id": stored.file_unique_id,
                "width": width,
                "height": height,
                "file_size": len(stored.data),
            },
        ]

    @staticmethod
    def _document(stored: _StoredFile) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": len(stored.data),
        }
        if stored.file_name:
            doc["file_name"] = stored.file_name
        if stored.mime_type:
            doc["mime_type"] = stored.mime_type
        return doc

    # ----------------------------------------------------------------- simulate users

    def user_sends(
        self,
        chat_id: int,
        text: str | None = None,
        *,
        user_id: int | None = None,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
        reply_to_message_id: int | None = None,
        photo: bytes | None = None,
        document: tuple[str, bytes] | None = None,
        voice: bytes | None = None,
        audio: tuple[str, bytes] | None = None,
        caption: str | None = None,
        message_thread_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        forwarded_from: int | None = None,
    ) -> dict[str, Any]:
        """Enqueue a `message` update from a user and return the message dict; `forwarded_from` makes it a forward of
        that user's message; `voice` is a voice note's Ogg/Opus bytes, `audio` an audio file's name and bytes."""
        if text is None and photo is None and document is None and voice is None and audio is None:
            raise ValueError("user_sends needs text, photo, document, voice or audio")
        if user_id is None:
            user_id = chat_id if chat_type == "private" else DEFAULT_GROUP_USER_ID
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"}
        if username:
            user["username"] = username
        if chat_type == "private":
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
            if username:
                chat["username"] = username
        else:
            chat = {"id": chat_id, "type": chat_type, "title": chat_title or "Test Group"}
            if message_thread_id is not None:
                chat["is_forum"] = True
        with self._lock:
            self._chats[chat_id] = chat
            message: dict[str, Any] = {
                "message_id": self._alloc_message_id(chat_id),
                "from": user,
                "chat": dict(chat),
                "date": int(time.time()),
            }
            if message_thread_id is not None:
                message["message_thread_id"] = message_thread_id
                message["is_topic_message"] = True
            if forwarded_from is not None:
                origin = {"id": forwarded_from, "is_bot": False, "first_name": "Someone"}
                message["forward_origin"] = {"type": "user", "date": message["date"] - 60, "sender_user": origin}
            if reply_to_message_id is not None:
                replied = self._messages.get((chat_id, reply_to_message_id))
                if replied is None:
                    raise ValueError(f"no message {reply_to_message_id} in chat {chat_id} to reply to")
                if (chat_id, reply_to_message_id) not in self._deleted:
                    message["reply_to_message"] = self._embed_reply(replied)
            if photo is not None or document is not None or voice is not None or audio is not None:
                if photo is not None:
                    stored = self._store_file(photo, "photos", None, "image/jpeg")
                    message["photo"] = self._photo_sizes(stored)
                elif voice is not None:  # Telegram sends a voice note with its length and type, never a name
                    message["voice"] = {**self._document(self._store_file(voice, "voice", None, "audio/ogg")), "duration": 3}
                elif audio is not None:
                    name, data = audio
                    mime = mimetypes.guess_type(name)[0] or "audio/mpeg"
                    message["audio"] = {**self._document(self._store_file(data, "music", name, mime)), "duration": 3}
                else:
                    name, data = document  # type: ignore[misc]
                    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
                    message["document"] = self._document(self._store_file(data, "documents", name, mime))
                media_caption = caption if caption is not None else text
                if media_caption:
                    message["caption"] = media_caption
                    caption_entities = entities if entities is not None else auto_entities(media_caption)
                    if caption_entities:
                        message["caption_entities"] = caption_entities
            else:
                message["text"] = text
                text_entities = entities if entities is not None else auto_entities(text or "")
                if text_entities:
                    message["entities"] = text_entities
            self._messages[(chat_id, message["message_id"])] = message
            snapshot = copy.deepcopy(message)
        self._enqueue({"message": copy.deepcopy(message)})
        return snapshot

    def user_edits(self, chat_id: int, message_id: int, new_text: str) -> dict[str, Any]:
        """Edit a user's message (text, or caption for media) and enqueue an `edited_message` update."""
        with self._lock:
            message = self._messages.get((chat_id, message_id))
            if message is None:
                raise ValueError(f"no message {message_id} in chat {chat_id}")
            key = "caption" if "caption" in message or "text" not in message else "text"
            message[key] = new_text
            entities = auto_entities(new_text)
            ent_key = "caption_entities" if key == "caption" else "entities"
            if entities:
                message[ent_key] = entities
            else:
                message.pop(ent_key, None)
            message["edit_date"] = int(time.time())
            snapshot = copy.deepcopy(message)
        self._enqueue({"edited_message": copy.deepcopy(message)})
        return snapshot

    def user_presses(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int | None = None,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> str:
        """Enqueue a `callback_query` update: `user_id` pressed the inline button with `data` under message
        `message_id` (any data: a forged press is one whose data no button carries). Returns the query's id."""
        if user_id is None:
            user_id = chat_id if chat_id > 0 else DEFAULT_GROUP_USER_ID
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"}
        if username:
            user["username"] = username
        with self._lock:
            message = self._live_message(chat_id, message_id)
            if message is None:
                # Telegram sends what it still knows of an old or deleted message: an InaccessibleMessage.
                message = {"chat": dict(self._chat(chat_id)), "message_id": message_id, "date": 0}
            query_id = str(secrets.randbits(62))
            query = {
                "id": query_id,
                "from": user,
                "message": copy.deepcopy(message),
                "chat_instance": str(abs(chat_id) * 7919),
                "data": data,
            }
            self._presses[query_id] = copy.deepcopy(query)
        self._enqueue({"callback_query": query})
        return query_id

    def press_answers(self) -> dict[str, dict[str, Any]]:
        """answerCallbackQuery's parameters by query id, for the presses answered so far."""
        with self._lock:
            return copy.deepcopy(self._press_answers)

    def inline_buttons(self, chat_id: int, message_id: int) -> list[tuple[str, str]]:
        """The (text, callback_data) of each inline button under a message, as it shows now."""
        with self._lock:
            message = self._live_message(chat_id, message_id) or {}
            rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []
            return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]

    def push_raw_update(self, update: dict[str, Any]) -> int:
        """Enqueue any raw update dict (assigning update_id if missing) and return its update_id."""
        return self._enqueue(copy.deepcopy(update))

    # ----------------------------------------------------------------- scripting failures

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        description: str = "Too Many Requests: retry after 1",
        retry_after: int | None = 1,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """Make the next `times` calls of `method` ("*" = any method) fail, once `after` calls went through;
        retry_after is sent only for 429."""
        if status != 429:
            # Clients map any response carrying retry_after to a rate-limit error, so keep it 429-only.
            retry_after = None
            if description == "Too Many Requests: retry after 1":
                description = _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")
        elif description == "Too Many Requests: retry after 1" and retry_after is not None:
            description = f"Too Many Requests: retry after {retry_after}"
        with self._lock:
            self._failures.setdefault(method.lower(), []).append(_Failure(status, description, retry_after, times, after))

    def hold(self, method: str, chat_id: int) -> threading.Event:
        """Keep every `method` call for `chat_id` unanswered until the returned event is set."""
        released = threading.Event()
        with self._lock:
            self._holds[(method.lower(), str(chat_id))] = released
        return released

    def answer_polls_at_once(self, enabled: bool = True) -> None:
        """Answer getUpdates at once whatever its timeout, like a proxy or local server that does not hold long polls."""
        with self._lock:
            self._polls_at_once = enabled

    def reject_entities_next(self, times: int = 1, *, method: str = "sendMessage") -> None:
        """Make the next `times` `method` calls that set parse_mode fail with "can't parse entities"."""
        with self._lock:
            self._reject_entities[method.lower()] = self._reject_entities.get(method.lower(), 0) + times

    def refuse_unseen_reply_targets(self, enabled: bool = True) -> None:
        """Refuse a reply to a message id the chat never had, even with allow_sending_without_reply.

        Telegram answers 400 "Bad Request: message to be replied not found" for some reply targets whatever
        that flag says; a deleted message (one the chat had) is still let through when the flag is set.
        """
        with self._lock:
            self._refuse_unseen_replies = enabled

    def register_method(self, name: str, handler: Callable[[dict[str, Any]], Any]) -> None:
        """Serve an extra (or override a built-in) method: handler(params) -> result, may raise ApiError."""
        with self._lock:
            self._custom = {n: h for n, h in self._custom.items() if n.lower() != name.lower()}
            self._custom[name] = handler

    def _take_entity_rejection(self, method: str, params: dict[str, Any]) -> None:
        if not _opt_str(params, "parse_mode"):
            return
        with self._lock:
            left = self._reject_entities.get(method.lower(), 0)
            if left <= 0:
                return
            self._reject_entities[method.lower()] = left - 1
        raise _entity_error("Can't find end of the entity starting at byte offset 0")

    # ----------------------------------------------------------------- observation

    @property
    def calls(self) -> list[Call]:
        """Snapshot of every request, in arrival order."""
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        """Calls of one method (case-insensitive)."""
        return [c for c in self.calls if c.method.lower() == method.lower()]

    def clear_calls(self) -> None:
        """Forget recorded calls (sent messages and updates are kept)."""
        with self._lock:
            self._calls.clear()

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the fake's own handlers (should stay empty)."""
        with self._lock:
            return list(self._errors)

    def _sent_locked(self, chat_id: int | None) -> list[dict[str, Any]]:
        result = []
        for rec in self._sent:
            if chat_id is not None and rec.message["chat"]["id"] != chat_id:
                continue
            item = copy.deepcopy(rec.message)
            item.update(
                params=dict(rec.params), method=rec.method, deleted=rec.deleted, edits=list(rec.edits)
            )
            if rec.file_bytes is not None:
                item["file_bytes"] = rec.file_bytes
            result.append(item)
        return result

    def sent_messages(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """Bot-sent messages in order: the Telegram message dict plus params/method/deleted/edits keys."""
        with self._lock:
            return self._sent_locked(chat_id)

    def wait_for_sent(self, chat_id: int | None, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least `count` messages were sent (to chat_id, or anywhere if None)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                sent = self._sent_locked(chat_id)
                if len(sent) >= count:
                    return sent
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(self._describe_shortfall(chat_id, count, timeout, sent))
                self._cond.wait(remaining)

    async def await_sent(self, chat_id: int | None, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Async wait_for_sent that polls instead of blocking the caller's event loop."""
        deadline = time.monotonic() + timeout
        while True:
            sent = self.sent_messages(chat_id)
            if len(sent) >= count:
                return sent
            if time.monotonic() >= deadline:
                raise AssertionError(self._describe_shortfall(chat_id, count, timeout, sent))
            await asyncio.sleep(0.01)

    def wait_for_call(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        """Block until `method` has been called (and answered) at least `count` times."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                done = [c for c in self.calls_to(method) if c.status is not None]
                if len(done) >= count:
                    return done
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [c.method for c in self._calls]
                    raise AssertionError(f"expected {count}x {method} within {timeout}s; calls so far: {seen}")
                self._cond.wait(remaining)

    def _describe_shortfall(self, chat_id: int | None, count: int, timeout: float, sent: list[dict[str, Any]]) -> str:
        where = "any chat" if chat_id is None else f"chat {chat_id}"
        summary = [(m["chat"]["id"], m["message_id"], m.get("text", m.get("caption"))) for m in sent]
        failed = [(c.method, c.status, (c.response or {}).get("description")) for c in self.calls if (c.status or 200) >= 400]
        return (
            f"expected >= {count} sent messages to {where} within {timeout}s, got {len(sent)}: {summary}; "
            f"failed calls: {failed}; all sent: {len(self._sent)}"
        )

    def chat_actions(self, chat_id: int) -> list[Call]:
        """sendChatAction calls addressed to chat_id."""
        return [c for c in self.calls_to("sendChatAction") if str(c.params.get("chat_id")) == str(chat_id)]

    def reactions(self, chat_id: int) -> list[dict[str, Any]]:
        """Reactions the bot set in chat_id: dicts with message_id, reaction (list), is_big."""
        with self._lock:
            return [copy.deepcopy(r) for r in self._reactions if r["chat_id"] == chat_id]

    def file_bytes(self, file_id: str) -> bytes:
        """Bytes stored for a file_id (user uploads and bot uploads alike)."""
        with self._lock:
            return self._files[file_id].data

    def message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """Current state of any message in history (None if unknown)."""
        with self._lock:
            message = self._messages.get((chat_id, message_id))
            return copy.deepcopy(message) if message is not None else None

    @property
    def commands(self) -> list[dict[str, Any]]:
        """The command list last set via setMyCommands for the default scope."""
        return self.commands_for(_scope_key({}))

    def commands_for(self, scope: dict[str, Any] | str) -> list[dict[str, Any]]:
        """The command list set for a scope (`{"type": "chat", "chat_id": 42}`); Telegram falls back to the default."""
        key = scope if isinstance(scope, str) else json.dumps(scope, sort_keys=True)
        with self._lock:
            return copy.deepcopy(self._commands.get(key, self._commands.get(_scope_key({}), [])))

    @property
    def acked_offset(self) -> int:
        """Highest offset the bot confirmed via getUpdates(offset=...); 0 if none yet."""
        with self._lock:
            return self._acked_offset

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by the bot."""
        with self._lock:
            return len(self._updates)

    # ----------------------------------------------------------------- API methods

    def _m_get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self._bot_user(),
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _confirm(self, offset: int) -> None:
        """Apply getUpdates offset semantics: drop (forever) updates below the offset."""
        with self._lock:
            if offset < 0:
                # Negative offset: keep only the last -offset updates, forget the rest.
                self._updates = self._updates[offset:]
                if self._updates:
                    self._acked_offset = max(self._acked_offset, int(self._updates[0]["update_id"]))
                return
            self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
            self._acked_offset = max(self._acked_offset, offset)

    async def _m_get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = _opt_int(params, "offset")
        limit = min(max(_opt_int(params, "limit") or 100, 1), 100)
        timeout = max(_opt_int(params, "timeout") or 0, 0)
        with self._lock:
            if self._polls_at_once:
                timeout = 0
        if offset is not None:
            self._confirm(offset)
        with self._lock:
            self._poll_generation += 1
            generation = self._poll_generation
        # Like Telegram, a new getUpdates terminates any older long poll with 409.
        self._wake_pollers()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = self._updates_event
            with self._lock:
                if self._poll_generation != generation:
                    raise ApiError(409, CONFLICT_DESCRIPTION)
                batch = copy.deepcopy(self._updates[:limit])
            remaining = deadline - loop.time()
            if batch or self._stopping or remaining <= 0 or event is None:
                return batch
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                pass

    def _resolve_reply(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        """Honour reply_parameters (or legacy reply_to_message_id) and return the message to embed."""
        reply = _opt_json(params, "reply_parameters")
        if isinstance(reply, dict) and reply.get("message_id") is not None:
            target_chat = self._chat_id({"chat_id": reply["chat_id"]}) if reply.get("chat_id") else chat_id
            target_id = int(reply["message_id"])
            allow_missing = bool(reply.get("allow_sending_without_reply"))
        else:
            legacy = _opt_int(params, "reply_to_message_id")
            if legacy is None:
                return None
            target_chat, target_id = chat_id, legacy
            allow_missing = _opt_bool(params, "allow_sending_without_reply")
        with self._lock:
            target = self._live_message(target_chat, target_id)
            if target is not None:
                return self._embed_reply(target)
            refused = self._refuse_unseen_replies and (target_chat, target_id) not in self._messages
        if allow_missing and not refused:
            return None
        raise _bad("message to be replied not found")

    def _record_bot_message(
        self, method: str, chat_id: int, params: dict[str, Any], content: dict[str, Any], file_bytes: bytes | None = None
    ) -> dict[str, Any]:
        """Create a bot-sent message in history and the sent log; returns a snapshot for the response."""
        reply_to = self._resolve_reply(chat_id, params)
        thread_id = _opt_int(params, "message_thread_id")
        markup = _opt_json(params, "reply_markup")
        with self._lock:
            message: dict[str, Any] = {
                "message_id": self._alloc_message_id(chat_id),
                "from": self._bot_user(),
                "chat": dict(self._chat(chat_id)),
                "date": int(time.time()),
            }
            if thread_id is not None:
                message["message_thread_id"] = thread_id
                message["is_topic_message"] = True
            if reply_to is not None:
                message["reply_to_message"] = reply_to
            message.update(content)
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                message["reply_markup"] = markup  # Telegram echoes only inline keyboards
            key = (chat_id, message["message_id"])
            self._messages[key] = message
            record = _SentRecord(method, dict(params), message, file_bytes=file_bytes)
            self._sent.append(record)
            self._sent_by_key[key] = record
            return copy.deepcopy(message)

    def _m_send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        text = _opt_str(params, "text")
        if not text or not text.strip():
            raise _bad("message text is empty")
        self._take_entity_rejection("sendMessage", params)
        plain, entities = format_text(text, _opt_str(params, "parse_mode"), _opt_json(params, "entities"))
        if not plain.strip():
            raise _bad("message text is empty")
        if _utf16_len(plain) > MAX_MESSAGE_LENGTH:
            raise _bad("message is too long")
        content: dict[str, Any] = {"text": plain}
        if entities:
            content["entities"] = entities
        preview = _opt_json(params, "link_preview_options")
        if isinstance(preview, dict) and preview:
            content["link_preview_options"] = preview
        return self._record_bot_message("sendMessage", chat_id, params, content)

    def _m_edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("inline_message_id"):
            raise _bad("inline messages are not supported by FakeTelegram")
        chat_id = self._chat_id(params)
        message_id = _message_id(params)
        text = _opt_str(params, "text")
        if not text or not text.strip():
            raise _bad("message text is empty")
        self._take_entity_rejection("editMessageText", params)
        plain, entities = format_text(text, _opt_str(params, "parse_mode"), _opt_json(params, "entities"))
        if not plain.strip():
            raise _bad("message text is empty")
        if _utf16_len(plain) > MAX_MESSAGE_LENGTH:
            raise _bad("message is too long")
        markup = _opt_json(params, "reply_markup")
        with self._lock:
            message = self._live_message(chat_id, message_id)
            if message is None:
                raise _bad("message to edit not found")
            if message.get("from", {}).get("id") != self.bot_id:
                raise _bad("message can't be edited")
            if "text" not in message:
                raise _bad("there is no text in the message to edit")
            new_markup = markup if isinstance(markup, dict) and "inline_keyboard" in markup else None
            if (
                message["text"] == plain
                and message.get("entities", []) == entities
                and message.get("reply_markup") == new_markup
            ):
                raise _bad(
                    "message is not modified: specified new message content and reply markup are exactly "
                    "the same as a current content and reply markup of the message"
                )
            message["text"] = plain
            if entities:
                message["entities"] = entities
            else:
                message.pop("entities", None)
            if new_markup is not None:
                message["reply_markup"] = new_markup
            else:
                message.pop("reply_markup", None)
            message["edit_date"] = int(time.time())
            record = self._sent_by_key.get((chat_id, message_id))
            if record is not None:
                record.edits.append(plain)
            return copy.deepcopy(message)

    def _delete(self, chat_id: int, message_id: int) -> bool:
        with self._lock:
            if self._live_message(chat_id, message_id) is None:
                return False
            self._deleted.add((chat_id, message_id))
            record = self._sent_by_key.get((chat_id, message_id))
            if record is not None:
                record.deleted = True
            return True

    def _m_delete_message(self, params: dict[str, Any]) -> bool:
        if not self._delete(self._chat_id(params), _message_id(params)):
            raise _bad("message to delete not found")
        return True

    def _m_delete_messages(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        ids = _opt_json(params, "message_ids")
        if not isinstance(ids, list) or not ids:
            raise _bad("message identifiers are not specified")
        for message_id in ids:
            self._delete(chat_id, int(message_id))
        return True

    def _m_set_message_reaction(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        message_id = _message_id(params)
        reaction = _opt_json(params, "reaction") or []
        if not isinstance(reaction, list):
            raise _bad("REACTION_INVALID")
        for item in reaction:
            if not isinstance(item, dict) or item.get("type") not in {"emoji", "custom_emoji", "paid"}:
                raise _bad("REACTION_INVALID")
            # Tolerate a trailing variation selector (e.g. "❤️"), which clients commonly send.
            if item["type"] == "emoji" and str(item.get("emoji", "")).replace("\ufe0f", "") not in ALLOWED_REACTIONS:
                raise _bad("REACTION_INVALID")
        with self._lock:
            if self._live_message(chat_id, message_id) is None:
                raise _bad("MESSAGE_ID_INVALID")
            self._reactions.append(
                {
                    "chat_id": chat_id,
                    "message_id": message_id,
                    "reaction": reaction,
                    "is_big": _opt_bool(params, "is_big"),
                    "ts": time.monotonic(),
                }
            )
        return True

    def _m_answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = _opt_str(params, "callback_query_id")
        with self._lock:
            # Like Telegram: a query we never sent, or one answered already, is refused.
            if query_id not in self._presses or query_id in self._press_answers:
                raise _bad("query is too old and response timeout expired or query ID is invalid")
            self._press_answers[query_id] = dict(params)
        return True

    def _m_send_chat_action(self, params: dict[str, Any]) -> bool:
        self._chat_id(params)
        if _opt_str(params, "action") not in CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        return True

    def _upload(self, params: dict[str, Any], field_name: str, kind: str) -> _StoredFile:
        """Resolve a file param: direct multipart part, attach://name, or an existing file_id."""
        value = params.get(field_name)
        if isinstance(value, str) and value.startswith("attach://"):
            value = params.get(value.removeprefix("attach://"))
            if not isinstance(value, UploadedFile):
                raise _bad(f"wrong remote file identifier specified: can't find attached file for {field_name}")
        if isinstance(value, UploadedFile):
            mime = value.content_type
            if not mime or mime == "application/octet-stream":
                mime = mimetypes.guess_type(value.filename or "")[0] or mime
            if kind == "photos":
                mime = "image/jpeg"  # Telegram re-encodes photos as JPEG
            return self._store_file(value.data, kind, value.filename if kind != "photos" else None, mime)
        if value is None or value == "":
            raise _bad(f"there is no {field_name} in the request")
        if isinstance(value, str):
            with self._lock:
                if value in self._files:
                    return self._files[value]
            if value.startswith(("http://", "https://")):
                raise _bad("failed to get HTTP URL content")
        raise _bad("wrong file identifier/HTTP URL specified")

    def _caption(self, params: dict[str, Any]) -> dict[str, Any]:
        caption = _opt_str(params, "caption")
        if not caption:
            return {}
        plain, entities = format_text(caption, _opt_str(params, "parse_mode"), _opt_json(params, "caption_entities"))
        if _utf16_len(plain) > MAX_CAPTION_LENGTH:
            raise _bad("message caption is too long")
        content: dict[str, Any] = {"caption": plain}
        if entities:
            content["caption_entities"] = entities
        return content

    def _m_send_photo(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        stored = self._upload(params, "photo", "photos")
        content = {"photo": self._photo_sizes(stored), **self._caption(params)}
        return self._record_bot_message("sendPhoto", chat_id, params, content, file_bytes=stored.data)

    def _m_send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        stored = self._upload(params, "document", "documents")
        content = {"document": self._document(stored), **self._caption(params)}
        return self._record_bot_message("sendDocument", chat_id, params, content, file_bytes=stored.data)

    def _m_get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = _opt_str(params, "file_id")
        with self._lock:
            stored = self._files.get(file_id or "")
        if stored is None:
            raise _bad("invalid file_id")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": len(stored.data),
            "file_path": stored.file_path,
        }

    def _m_get_chat_member(self, params: dict[str, Any]) -> dict[str, Any]:
        """Everyone is a plain member unless a test registers its own getChatMember."""
        self._chat_id(params)
        user_id = _opt_int(params, "user_id")
        if user_id is None:
            raise _bad("user_id is required")
        return {"status": "member", "user": {"id": user_id, "is_bot": False, "first_name": "Member"}}

    def _m_set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = _opt_json(params, "commands")
        if not isinstance(commands, list):
            raise _bad("can't parse commands JSON object")
        for command in commands:
            name = str(command.get("command", "")) if isinstance(command, dict) else ""
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
        with self._lock:
            self._commands[_scope_key(params)] = commands
        return True

    def _m_delete_my_commands(self, params: dict[str, Any]) -> bool:
        with self._lock:
            self._commands.pop(_scope_key(params), None)
        return True

    def _m_delete_webhook(self, params: dict[str, Any]) -> bool:
        if _opt_bool(params, "drop_pending_updates"):
            with self._lock:
                self._updates.clear()
        return True

    def _m_get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": "", "has_custom_certificate": False, "pending_update_count": self.pending_updates}
