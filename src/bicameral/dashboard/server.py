"""The dashboard's web app: the Host header checked first, then the session cookie; login links, the live page and
its event stream, logout with a CSRF token. Without a session no page or endpoint shows anything."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bicameral.console.desk import OwnerCommand
from bicameral.dashboard.auth import SESSION_SECONDS, Logins, Session, same_token
from bicameral.dashboard.chat import WebChannel
from bicameral.dashboard.cost_view import cost_body
from bicameral.dashboard.feed import LiveFeed
from bicameral.dashboard.health_view import refused_body, skills_body
from bicameral.dashboard.memory_view import delete_memory, memory_names, memory_text, save_memory
from bicameral.dashboard.pages import (
    chat_form,
    live_page,
    memory_page,
    message_page,
    schedules_page,
    status_page,
    titled_page,
)
from bicameral.dashboard.schedules_view import schedule_rows
from bicameral.dashboard.sources import Sources
from bicameral.dashboard.status import status_sections
from bicameral.store.memory_files import MAX_FILE_BYTES
from bicameral.types import Clock

COOKIE = "bicameral_session"
MAX_FORM_BYTES = 4096  # the logout form is one field; anything larger is refused before it is read whole
MAX_CHAT_BYTES = 256 * 1024  # a chat message (the gate cuts its text further, BICAMERAL_MAX_INBOUND_CHARS)
# A memory file's text, percent-encoded (a byte can take three): a larger post is refused before it is read whole,
# a smaller one over the file limit by the memory page with the reason.
MAX_MEMORY_FORM_BYTES = 3 * MAX_FILE_BYTES + 4096
STATIC = {"htmx.min.js", "sse.js"}
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' "
    "'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",  # the login link's token never leaves in a Referer
    "cache-control": "no-store",
}
NOT_LOGGED_IN = "Send /dashboard to the assistant in your private chat for a login link."


@dataclass(frozen=True)
class DashboardConfig:
    host: str
    port: int
    bot_name: str
    memory_dir: Path | None = None


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
EVERY_ADDRESS = frozenset({"0.0.0.0", "::"})  # a container's: its port published on the host's loopback


def allowed_hosts(host: str) -> list[str]:
    """The names a browser may use for us: the bound address, and `localhost` when that is the loopback (or every
    address). Any other name, such as a DNS-rebinding attacker's own, is refused."""
    if host in LOOPBACK or host in EVERY_ADDRESS:
        return sorted({"localhost", "127.0.0.1"} | ({host} if host in LOOPBACK else set()))
    return [host]


def build_app(
    config: DashboardConfig, logins: Logins, feed: LiveFeed, chat: WebChannel,
    commands: Callable[[], Sequence[OwnerCommand]], sources: Sources, clock: Clock,
) -> Starlette:
    origins = {f"http://{name}:{config.port}" for name in allowed_hosts(config.host)}

    def session_of(request: Request) -> Session | None:
        return logins.session(request.cookies.get(COOKIE))

    async def login(request: Request) -> Response:
        redeemed = logins.redeem(request.path_params["token"])
        if redeemed is None:
            return HTMLResponse(message_page("Link not valid", "This login link was used already, has expired or "
                                             "was never issued. " + NOT_LOGGED_IN), status_code=403)
        cookie, _ = redeemed
        # A page, not a redirect: a SameSite=Strict cookie is not sent on a redirect that started in another site
        # (the chat app), so the browser is sent on from here, our own page.
        page = message_page("Logged in", "Opening the dashboard…").replace(
            "</head>", '<meta http-equiv="refresh" content="0; url=/"></head>')
        response = HTMLResponse(page.replace("</p>", ' <a href="/">Open it</a>.</p>'))
        response.set_cookie(COOKIE, cookie, max_age=int(SESSION_SECONDS), path="/", httponly=True, samesite="strict")
        return response

    async def home(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        return HTMLResponse(live_page(config.bot_name, session.csrf))

    async def status(request: Request) -> Response:
        if session_of(request) is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        return HTMLResponse(status_page(config.bot_name, await status_sections(commands)))

    async def reminders(request: Request) -> Response:
        if session_of(request) is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        return HTMLResponse(schedules_page(config.bot_name, schedule_rows(sources.schedules)))

    async def cost(request: Request) -> Response:
        if session_of(request) is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        body = cost_body(sources.usage, sources.prices_path, clock())
        return HTMLResponse(titled_page(config.bot_name, "cost", body))

    async def skills(request: Request) -> Response:
        if session_of(request) is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        body = skills_body(sources.skills(), sources.plugins_path, sources.audit())
        return HTMLResponse(titled_page(config.bot_name, "skills and plugins", body))

    async def refused(request: Request) -> Response:
        if session_of(request) is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        return HTMLResponse(titled_page(config.bot_name, "refused senders", refused_body(sources.audit())))

    async def memory(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return HTMLResponse(message_page("Not logged in", NOT_LOGGED_IN), status_code=401)
        name = request.query_params.get("name")
        text = None if name is None else memory_text(config.memory_dir, name)
        if name is not None and text is None:
            return HTMLResponse(message_page("No such memory file", "Pick one from the list."), status_code=404)
        shown = None if name is None or text is None else (name, text)
        return HTMLResponse(memory_page(config.bot_name, session.csrf, memory_names(config.memory_dir), shown))

    async def memory_save(request: Request) -> Response:
        checked = await checked_form(request, MAX_MEMORY_FORM_BYTES)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        name, text = (form.get("name") or [""])[0], (form.get("text") or [""])[0]
        refused = save_memory(config.memory_dir, name, text)
        if refused is not None:
            return HTMLResponse(message_page("Not saved", f"{name[:120]} was not saved: {refused}."), status_code=400)
        sources.memory_changed()
        page = memory_page(config.bot_name, session.csrf, memory_names(config.memory_dir),
                           (name, memory_text(config.memory_dir, name) or ""), note=f"Saved {name}.")
        return HTMLResponse(page)

    async def memory_delete(request: Request) -> Response:
        checked = await checked_form(request, MAX_FORM_BYTES)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        name = (form.get("name") or [""])[0]
        if not delete_memory(config.memory_dir, name):
            return HTMLResponse(message_page("Not deleted", "There is no such memory file."), status_code=400)
        sources.memory_changed()
        page = memory_page(config.bot_name, session.csrf, memory_names(config.memory_dir), None, note=f"Deleted {name}.")
        return HTMLResponse(page)

    async def events(request: Request) -> Response:
        if session_of(request) is None:
            return Response(status_code=401)
        cookie = request.cookies.get(COOKIE)
        queue = feed.subscribe()

        async def stream() -> AsyncIterator[str]:
            try:
                yield ": connected\n\n"
                while (event := await queue.get()) is not None and logins.session(cookie) is not None:
                    name, html = event
                    yield f"event: {name}\n" + "".join(f"data: {part}\n" for part in html.split("\n")) + "\n"
            finally:
                feed.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"})

    async def checked_form(request: Request, limit: int) -> tuple[Session, dict[str, list[str]]] | Response:
        """A state-changing request: a session, our own Origin, a form under `limit` bytes with the CSRF token."""
        session = session_of(request)
        if session is None:
            return Response(status_code=401)
        origin = request.headers.get("origin")
        if origin is not None and origin not in origins:
            return Response("cross-origin request refused", status_code=403)
        body = await _limited_body(request, limit)
        if body is None:
            return Response("request too large", status_code=413)
        form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4, keep_blank_values=True)
        given = form.get("csrf")
        if not same_token(given[0] if given else None, session.csrf):
            return Response("missing or wrong CSRF token", status_code=403)
        return session, form

    async def say(request: Request) -> Response:
        checked = await checked_form(request, MAX_CHAT_BYTES)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        text = (form.get("text") or [""])[0]
        if not await chat.submit(text):
            return Response("nothing to send", status_code=400)
        return HTMLResponse(chat_form(session.csrf))

    async def logout(request: Request) -> Response:
        checked = await checked_form(request, MAX_FORM_BYTES)
        if isinstance(checked, Response):
            return checked
        logins.end(request.cookies[COOKIE])
        response = HTMLResponse(message_page("Logged out", NOT_LOGGED_IN))
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response(status_code=404)
        body = resources.files("bicameral.dashboard").joinpath("static", name).read_bytes()
        return Response(body, media_type="text/javascript", headers={"cache-control": "max-age=86400"})

    routes = [
        Route("/", home), Route("/status", status), Route("/memory", memory), Route("/schedules", reminders),
        Route("/cost", cost), Route("/skills", skills), Route("/refused", refused), Route("/events", events),
        Route("/memory/save", memory_save, methods=["POST"]), Route("/memory/delete", memory_delete, methods=["POST"]),
        Route("/login/{token}", login),
        Route("/logout", logout, methods=["POST"]), Route("/chat", say, methods=["POST"]), Route("/static/{name}", static),
    ]
    middleware = [
        Middleware(_Headers),
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(config.host), www_redirect=False),
    ]
    return Starlette(routes=routes, middleware=middleware)


async def _limited_body(request: Request, limit: int) -> bytes | None:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


class _Headers:
    """The security headers on every response, the refusals included."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                present = {bytes(k).lower() for k, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message["headers"] = headers
            await send(message)

        await self._app(scope, receive, with_headers)  # type: ignore[arg-type]


