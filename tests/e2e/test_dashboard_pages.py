"""The dashboard's other pages over real HTTP on the loopback: memory files edited and deleted with the memory
store's checks (no traversal name, link or oversized text gets through; CSRF and our own Origin needed), the cost
chart and its table, skills and plugins with what did not load, and the refused senders; none without a session."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx

from bicameral.console.prices import Prices
from bicameral.console.usage import money, row_cost
from bicameral.store.memory_files import MAX_FILE_BYTES
from tests.conftest import OWNER
from tests.e2e.test_dashboard import _transcript_logged, logged_in  # noqa: F401 (the fixture applies here too)
from tests.fakes.model_server import Reply, ToolCall
from tests.support.chat import eventually

STRANGER = 3003


async def _csrf(client: httpx.AsyncClient, path: str = "/") -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', (await client.get(path)).text)
    assert found
    return found.group(1)


def _memory(app) -> Path:
    memory = app.stores.memory.root
    (memory / "chats").mkdir(parents=True, exist_ok=True)
    (memory / "chats" / "owner.md").write_text("- likes tea\n")
    return memory


async def test_a_memory_file_is_edited_and_deleted_from_the_page_and_the_index_follows(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    memory = _memory(app)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        await logged_in(telegram, client)
        csrf = await _csrf(client)
        page = (await client.get("/memory", params={"name": "chats/owner.md"})).text
        assert 'action="/memory/save"' in page and 'action="/memory/delete"' in page and "- likes tea" in page
        saved = await client.post("/memory/save", data={"csrf": csrf, "name": "chats/owner.md",
                                                        "text": "- likes coffee\r\n- and <b>cake</b>"})
        assert saved.status_code == 200 and "Saved chats/owner.md" in saved.text
        assert (memory / "chats" / "owner.md").read_text() == "- likes coffee\n- and <b>cake</b>\n"
        assert "and &lt;b&gt;cake&lt;/b&gt;" in saved.text
        assert [fact.text for fact in app.stores.memory.index.search("coffee", ["chat:owner"], 5)] == ["likes coffee"]
        deleted = await client.post("/memory/delete", data={"csrf": csrf, "name": "chats/owner.md"})
        assert deleted.status_code == 200 and "Deleted chats/owner.md" in deleted.text
    assert not (memory / "chats" / "owner.md").exists()
    assert "chats/owner.md" not in app.stores.memory.index.file_states()


async def test_memory_edits_refuse_traversal_links_oversize_and_forged_posts(telegram, models, start_bot, tmp_path):
    app = await start_bot(dashboard_port=0)
    memory = _memory(app)
    secret = tmp_path / "secret.md"
    secret.write_text("outside the memory folder\n")
    (memory / "link.md").symlink_to(secret)
    owner = memory / "chats" / "owner.md"
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        assert (await client.post("/memory/save", data={"csrf": "x", "name": "chats/owner.md", "text": "x"})).status_code == 401
        assert (await client.post("/memory/delete", data={"csrf": "x", "name": "chats/owner.md"})).status_code == 401
        await logged_in(telegram, client)
        csrf = await _csrf(client)
        for name in ("../secret.md", "link.md", str(secret), "chats/../../secret.md", "chats/%2e%2e/x", "new.md", ""):
            save = await client.post("/memory/save", data={"csrf": csrf, "name": name, "text": "overwritten"})
            assert save.status_code == 400, name
            delete = await client.post("/memory/delete", data={"csrf": csrf, "name": name})
            assert delete.status_code == 400, name
        assert secret.read_text() == "outside the memory folder\n" and (memory / "link.md").is_symlink()
        assert not (memory / "new.md").exists()

        over = await client.post("/memory/save", data={"csrf": csrf, "name": "chats/owner.md",
                                                       "text": "x" * (MAX_FILE_BYTES + 1)})
        assert over.status_code == 400 and "byte limit" in over.text
        huge = await client.post("/memory/save", data={"csrf": csrf, "name": "chats/owner.md", "text": "x" * 2_000_000})
        assert huge.status_code == 413
        assert (await client.post("/memory/save", data={"name": "chats/owner.md", "text": "x"})).status_code == 403
        assert (await client.post("/memory/save", data={"csrf": csrf, "name": "chats/owner.md", "text": "x"},
                                  headers={"origin": "https://evil.example"})).status_code == 403
        assert (await client.post("/memory/delete", data={"csrf": "wrong", "name": "chats/owner.md"})).status_code == 403
    assert owner.read_text() == "- likes tea\n"


async def test_the_cost_page_draws_each_day_model_and_chat_with_a_table_beside(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    now = time.time()
    chat = f"telegram:{OWNER}"
    for at, tokens in ((now, 1_000_000), (now - 2 * 86400, 500_000)):
        app.stores.usage.record(at=at, model="openai:gpt-4o", role="front", chat=chat, input_tokens=tokens,
                                output_tokens=0, cache_read_tokens=0, cache_write_tokens=0, outcome="ok")
    app.stores.usage.record(at=now, model="acme:mystery", role="back", chat=None, input_tokens=10, output_tokens=10,
                            cache_read_tokens=0, cache_write_tokens=0, outcome="ok")
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        assert (await client.get("/cost")).status_code == 401
        await logged_in(telegram, client)
        page = (await client.get("/cost")).text
    prices = Prices.load(app.settings.resolved_prices_path)
    both = money(sum(row_cost(row, prices) or 0 for row in app.stores.usage.totals(0, group_by=("model",))
                     if row.model == "openai:gpt-4o"))
    assert page.count('<svg role="img"') == 3 and page.count("<table>") == 3 and "<script>" not in page.split("</head>")[1]
    assert f"<td>openai:gpt-4o</td><td>{both}</td>" in page  # the model over both days
    assert f"<td>{chat}</td><td>{both}</td>" in page
    assert "Not counted (no known price): acme:mystery" in page
    assert page.count('class="bar"') == 14 + 1 + 1  # a bar a day, one model, one chat


async def test_skills_and_plugins_show_with_what_did_not_load(telegram, models, start_bot, make_settings):
    settings = make_settings()
    skills = settings.data_dir / "skills"
    (skills / "broken").mkdir(parents=True)
    (skills / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: [oops\n---\nNever read.\n")
    settings.resolved_plugins_path.write_text(json.dumps(
        {"mcps": [{"name": "notes", "command": "true", "enabled": False}, 5], "ask_before": ["web_fetch"]}))
    app = await start_bot(dashboard_port=0)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        refused = await client.get("/skills")
        assert refused.status_code == 401 and "morning-briefing" not in refused.text
        await logged_in(telegram, client)
        page = (await client.get("/skills")).text
    assert "<td>morning-briefing</td><td>shipped</td>" in page
    assert "<td>MCP servers</td><td>notes, ?</td>" in page
    assert "<td>tools that ask the owner first</td><td>web_fetch</td>" in page
    health = page.split("Did not load")[1]
    assert "skill &#x27;broken&#x27;" in health and "not valid YAML" in health
    assert "plugin mcps[1] is left out" in health


async def test_the_refused_senders_page_names_them_but_never_what_they_wrote(telegram, models, start_bot):
    app = await start_bot(dashboard_port=0)
    telegram.user_sends(STRANGER, "my secret plan: let me in", first_name="Mallory")
    await telegram.await_sent(STRANGER, 1)  # refused, and told so
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        refused = await client.get("/refused")
        assert refused.status_code == 401 and "Mallory" not in refused.text
        await logged_in(telegram, client)
        page = (await client.get("/refused")).text
    assert f"<td>Mallory (id {STRANGER})</td><td>1</td>" in page and f"telegram:{STRANGER}" in page
    assert "secret plan" not in page


async def test_the_progress_note_in_the_chat_panel_is_one_bubble_changed_in_place_and_removed(telegram, models,
                                                                                               start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("current_time", {"timezone": "UTC"})]),
        Reply(text="It is noon.", latency=3),
    )
    app = await start_bot(dashboard_port=0, progress_note_after_seconds=0.3)
    async with httpx.AsyncClient(base_url=app.dashboard.base_url) as client:
        await logged_in(telegram, client)
        csrf = await _csrf(client)
        lines: list[str] = []

        async def read() -> None:
            async with client.stream("GET", "/events") as stream:
                async for line in stream.aiter_lines():
                    lines.append(line)

        reading = asyncio.create_task(read())
        await eventually(lambda: any(line.startswith(": connected") for line in lines), "the stream to open")
        assert (await client.post("/chat", data={"text": "what time is it?", "csrf": csrf})).status_code == 200
        await eventually(lambda: any("It is noon." in line for line in lines), "the answer", timeout=20)
        reading.cancel()
    note = next(line for line in lines if "Still working on it" in line)
    key = re.search(r'id="(said-[^"]+)"', note)
    assert key and "hx-swap-oob" not in note
    removed = next(n for n, line in enumerate(lines) if f'id="{key.group(1)}" hx-swap-oob="delete"' in line)
    answer = next(n for n, line in enumerate(lines) if "It is noon." in line)
    assert removed < answer and "(edited)" not in "".join(lines)


async def test_an_edit_of_a_message_of_ours_replaces_its_bubble_and_any_other_is_shown_as_new():
    from bicameral.dashboard.chat import CHAT, WebChannel
    from bicameral.dashboard.feed import LiveFeed
    from bicameral.events import DeleteMessage, EditText, SendText

    feed = LiveFeed(asyncio.get_running_loop(), redact=lambda text: text)
    channel = WebChannel("Bot")
    channel.publish, channel.retract = feed.publish, feed.retract
    page = feed.subscribe()
    [sent] = (await channel.perform(SendText(chat=CHAT, text="first"))).message_ids
    await channel.perform(EditText(chat=CHAT, message_id=sent, text="second <i>x</i>"))
    await channel.perform(EditText(chat=CHAT, message_id='"><script>', text="elsewhere"))
    await channel.perform(DeleteMessage(chat=CHAT, message_id=sent))
    await channel.perform(DeleteMessage(chat=CHAT, message_id="../x y"))
    shown = [page.get_nowait() for _ in range(page.qsize())]
    assert [name for name, _ in shown] == ["chat"] * 4
    assert f'id="said-{sent}"' in shown[0][1] and "first" in shown[0][1]
    assert f'id="said-{sent}" hx-swap-oob="outerHTML"' in shown[1][1] and "second &lt;i&gt;x&lt;/i&gt;" in shown[1][1]
    assert "id=" not in shown[2][1] and "(edited) elsewhere" in shown[2][1]
    assert shown[3][1] == f'<div id="said-{sent}" hx-swap-oob="delete"></div>'
