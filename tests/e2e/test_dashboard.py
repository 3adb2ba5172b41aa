"""The web dashboard over real HTTP on the loopback: the owner's one-time link logs in, the live page's stream shows a
turn as it happens; no cookie, a used or unknown link, a forged Host, a cross-origin or oversized or tokenless form
each get nothing."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import httpx
import pytest

from bicameral.dashboard.auth import LINK_SECONDS, SESSION_SECONDS, Logins
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.support.access import write_access
from tests.support.chat import eventually


@pytest.fixture(autouse=True)
def _transcript_logged(caplog):
    caplog.set_level(logging.INFO, logger="bicameral.tx")  # `bicameral run` logs at INFO; tests may not


async def login_link(telegram) -> str:
    before = len(telegram.sent_messages(OWNER))
    telegram.user_sends(OWNER, "/dashboard")
    await eventually(lambda: len(telegram.sent_messages(OWNER)) > before, "the login link", timeout=15)
    text = telegram.sent_messages(OWNER)[-1]["text"]
    found = re.search(r"http://127\.0\.0\.1:\d+/login/\S+", text)
    assert found, text
    return found.group(0)


async def logged_in(telegram, client: httpx.AsyncClient) -> str:
    response = await client.get(await login_link(telegram))
    assert response.status_code == 200
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    return client.cookies["bicameral_session"]


async def test_without_a_session_nothing_shows(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    base = app.dashboard.base_url
    async with httpx.AsyncClient(base_url=base) as client:
        for path in ("/", "/events"):
            response = await client.get(path)
            assert response.status_code == 401 and "RX" not in response.text
        assert (await client.post("/logout", data={"csrf": "x"})).status_code == 401
        client.cookies.set("bicameral_session", "a-cookie-from-another-instance")
        assert (await client.get("/")).status_code == 401
        made_up = await client.get("/login/" + "A" * 43)
        assert made_up.status_code == 403 and "set-cookie" not in made_up.headers


async def test_a_login_link_works_once_and_the_live_page_shows_a_turn_as_it_happens(telegram, models, start_bot):
    models.script(Reply(text="Hello from the assistant"))
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        link = await login_link(telegram)
        first = await client.get(link)
        assert first.status_code == 200 and "set-cookie" in first.headers
        page = await client.get("/")
        assert page.status_code == 200 and 'sse-connect="/events"' in page.text
        again = await httpx.AsyncClient().get(link)  # the same link, from another browser
        assert again.status_code == 403 and "set-cookie" not in again.headers

        lines: list[str] = []

        async def read() -> None:
            async with client.stream("GET", "/events") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                async for line in stream.aiter_lines():
                    lines.append(line)

        reading = asyncio.create_task(read())
        await eventually(lambda: any(line.startswith(": connected") for line in lines), "the stream to open")
        telegram.user_sends(OWNER, "hi there, dashboard")
        await eventually(lambda: any("[TX]" in line and "Hello from the assistant" in line for line in lines),
                         "the reply on the live page", timeout=15)
        assert any("[RX]" in line and "hi there, dashboard" in line for line in lines)
        reading.cancel()


async def test_a_forged_host_header_gets_nothing_and_does_not_use_up_the_link(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        link = await login_link(telegram)
        forged = await client.get(link, headers={"host": "evil.example"})
        assert forged.status_code == 400 and "set-cookie" not in forged.headers
        await logged_in_with(client, link)
        assert (await client.get("/", headers={"host": f"evil.example:{app.dashboard.port}"})).status_code == 400
        assert (await client.get("/", headers={"host": f"localhost:{app.dashboard.port}"})).status_code == 200


async def logged_in_with(client: httpx.AsyncClient, link: str) -> None:
    assert (await client.get(link)).status_code == 200


async def test_logout_needs_the_csrf_token_from_our_own_origin_and_a_small_form(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        await logged_in(telegram, client)
        csrf = re.search(r'name="csrf" value="([^"]+)"', (await client.get("/")).text)
        assert csrf
        assert (await client.post("/logout", data={"csrf": "wrong"})).status_code == 403
        assert (await client.post("/logout", data={})).status_code == 403
        other = await client.post("/logout", data={"csrf": csrf.group(1)}, headers={"origin": "https://evil.example"})
        assert other.status_code == 403
        huge = await client.post("/logout", content=b"csrf=" + b"x" * 100_000,
                                 headers={"content-type": "application/x-www-form-urlencoded"})
        assert huge.status_code == 413
        malformed = await client.post("/logout", content=b"\xff\xfe%%%&&&=",
                                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert malformed.status_code == 403
        assert (await client.get("/")).status_code == 200  # none of those logged out
        out = await client.post("/logout", data={"csrf": csrf.group(1)}, headers={"origin": app.dashboard.base_url})
        assert out.status_code == 200
        client.cookies.clear()


async def test_logout_all_ends_every_session_and_a_group_gets_no_link(telegram, models, start_bot, make_settings):
    group = -100300
    write_access(make_settings(), policy="allowlist", allowed_chats=[group])
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        cookie = await logged_in(telegram, client)
        telegram.user_sends(OWNER, "/dashboard logout-all")
        await eventually(lambda: "Ended 1 dashboard session" in telegram.sent_messages(OWNER)[-1]["text"], "logout-all")
        client.cookies.set("bicameral_session", cookie)
        assert (await client.get("/")).status_code == 401
    telegram.user_sends(group, "/dashboard", user_id=OWNER, chat_type="supergroup", chat_title="Team")
    answer = (await telegram.await_sent(group, 1))[0]["text"]
    assert "private chat" in answer and "/login/" not in answer


def test_a_session_ends_after_twelve_hours():
    now = [1000.0]
    logins = Logins(clock=lambda: now[0])
    cookie, _ = logins.redeem(logins.new_link_token()) or ("", None)
    assert logins.session(cookie) is not None
    now[0] += SESSION_SECONDS + 1
    assert logins.session(cookie) is None


def test_a_link_expires_after_ten_minutes():
    now = [1000.0]
    logins = Logins(clock=lambda: now[0])
    token = logins.new_link_token()
    now[0] += LINK_SECONDS + 1
    assert logins.redeem(token) is None
    fresh = logins.new_link_token()
    assert logins.redeem(fresh) is not None and logins.redeem(fresh) is None


async def test_the_dashboard_is_off_unless_a_port_is_set(telegram, models, start_bot):
    app = await start_bot()
    assert app.dashboard is None
    assert "dashboard" not in app.console.names


async def test_the_chat_panel_refuses_what_the_logout_form_refuses(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        assert (await client.post("/chat", data={"text": "hi", "csrf": "x"})).status_code == 401
        await logged_in(telegram, client)
        csrf = re.search(r'name="csrf" value="([^"]+)"', (await client.get("/")).text).group(1)  # type: ignore[union-attr]
        assert (await client.post("/chat", data={"text": "hi"})).status_code == 403
        assert (await client.post("/chat", data={"text": "hi", "csrf": csrf},
                                  headers={"origin": "http://evil.example"})).status_code == 403
        huge = await client.post("/chat", data={"text": "x" * 300_000, "csrf": csrf})
        assert huge.status_code == 413
        assert (await client.post("/chat", data={"text": "  ", "csrf": csrf})).status_code == 400
    assert not [r for r in models.requests]  # none of them reached the model


async def test_a_page_that_never_reads_its_stream_is_cut_off_and_holds_nothing_up():
    from bicameral.dashboard.feed import QUEUE_LINES, LiveFeed

    feed = LiveFeed(asyncio.get_running_loop(), redact=lambda text: text)
    stuck = feed.subscribe()
    reading = feed.subscribe()
    for n in range(QUEUE_LINES + 1):
        feed.publish("you", f"message {n}")
        if n % 50 == 0:
            while not reading.empty():
                reading.get_nowait()
    assert feed.subscribers == 1  # the stuck page is gone, the reading one stays
    assert stuck.get_nowait() is None  # its stream ends


async def test_bound_to_every_address_it_answers_the_loopback_names_only(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0, dashboard_host="0.0.0.0")
    assert app.dashboard.base_url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        port = app.dashboard.port
        assert (await client.get("/", headers={"host": f"localhost:{port}"})).status_code == 401  # answered
        assert (await client.get("/", headers={"host": f"0.0.0.0:{port}"})).status_code == 400
        assert (await client.get("/", headers={"host": f"rebound.example:{port}"})).status_code == 400


async def test_the_status_page_shows_health_audit_and_cost_to_the_owner_only(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        refused = await client.get("/status")
        assert refused.status_code == 401 and "Health at" not in refused.text
        await logged_in(telegram, client)
        page = (await client.get("/status")).text
    assert "Health at" in page and "uptime" in page  # /health's figures
    assert "Refused by the access policy" in page and "Last backup:" in page  # /audit's
    assert "/cost" in page


async def test_the_memory_page_shows_the_files_and_no_name_leads_outside(telegram, models, start_bot, tmp_path):
    app = await start_bot(dashboard_port=0)
    memory = app.settings.data_dir / "memory"
    (memory / "chats").mkdir(parents=True, exist_ok=True)
    (memory / "chats" / "owner.md").write_text("- likes <b>tea</b>\n")
    (tmp_path / "secret.md").write_text("outside the memory folder\n")
    (memory / "link.md").symlink_to(tmp_path / "secret.md")
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        assert (await client.get("/memory", params={"name": "chats/owner.md"})).status_code == 401
        await logged_in(telegram, client)
        listing = (await client.get("/memory")).text
        assert "chats/owner.md" in listing and "link.md" not in listing
        shown = await client.get("/memory", params={"name": "chats/owner.md"})
        assert shown.status_code == 200 and "likes &lt;b&gt;tea&lt;/b&gt;" in shown.text
        for name in ("../secret.md", "link.md", str(tmp_path / "secret.md"), "chats/../../secret.md", "chats/%2e%2e/x"):
            refused = await client.get("/memory", params={"name": name})
            assert refused.status_code == 404 and "outside the memory folder" not in refused.text, name


async def test_the_reminders_page_lists_every_active_schedule_as_text(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    now = time.time()
    app.stores.schedules.create(chat=f"telegram:{OWNER}", creator=f"telegram:{OWNER}", kind="text",
                                body="water the <i>plants</i>", tz="UTC", next_due=now + 3600, now=now)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        refused = await client.get("/schedules")
        assert refused.status_code == 401 and "plants" not in refused.text
        await logged_in(telegram, client)
        page = (await client.get("/schedules")).text
    assert "water the &lt;i&gt;plants&lt;/i&gt;" in page and f"telegram:{OWNER}" in page and "reminder" in page
