"""A homeserver that fails: 429 with retry_after_ms, 500 with an HTML page, a sync that never answers. The real Synapse
sits behind a proxy that fails the next syncs as told; the channel waits as asked, backs off, and loses nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import deque

import aiohttp
from aiohttp import web

from bicameral.app import App, matrix_config
from bicameral.channels.matrix import MatrixChannel
from tests.fakes.model_server import Reply
from tests.support.chat import eventually, quiet_for


class FlakyHomeserver:
    """Passes every request to Synapse, but answers the next `/sync` requests with the queued faults."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.faults: deque[tuple] = deque()
        self.join_faults = 0  # the next joins answered with a 500 page
        self.syncs = 0
        self.release = asyncio.Event()

    async def start(self) -> str:
        app = web.Application(client_max_size=50 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._session = aiohttp.ClientSession()
        port = site._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self.release.set()
        await self._session.close()
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if "/join" in request.path and self.join_faults:
            self.join_faults -= 1
            return web.Response(status=500, text="<html>Bad Gateway</html>", content_type="text/html")
        if request.path.endswith("/sync"):
            self.syncs += 1
            if self.faults:
                fault = self.faults.popleft()
                if fault[0] == 429:
                    body = {"errcode": "M_LIMIT_EXCEEDED", "error": "Too many requests", "retry_after_ms": fault[1]}
                    return web.json_response(body, status=429)
                if fault[0] == 500:
                    return web.Response(status=500, text="<html><body>Internal Server Error</body></html>",
                                        content_type="text/html")
                if fault[0] == "hang":
                    await self.release.wait()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=await request.read()) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type=answer.content_type)


async def start_behind(proxy_url, make_settings, bot, delays, **config):
    settings = make_settings(telegram_token=None, matrix_homeserver=proxy_url, matrix_user_id=bot.user_id,
                             matrix_password=bot.password, matrix_owner_id=None)

    async def sleep(seconds: float) -> None:
        delays.append(seconds)  # what the channel asked to wait, kept short here: the test controls time
        await asyncio.sleep(0.01)

    channel = MatrixChannel(dataclasses.replace(matrix_config(settings), **config), sleep=sleep)
    app = App(settings, [channel])
    await app.start()
    return app


async def test_429_and_500_on_sync_are_waited_out_and_nothing_is_lost(make_settings, synapse, matrix_user, human, models):
    models.responder(lambda request: Reply(text="still here"))
    proxy = FlakyHomeserver(synapse.url)
    url = await proxy.start()
    bot, ann = matrix_user("bot"), human("ann")
    delays: list[float] = []
    app = None
    try:
        app = await start_behind(url, make_settings, bot, delays)
        app.gate.access.update(lambda c: c.model_copy(update={"policy": "allowlist", "allowed_users": [ann.user.user_id]}))
        room = await ann.room(bot.user_id, direct=True)
        proxy.faults.extend([(429, 1500), (500,), (500,)])
        before = proxy.syncs
        await ann.say(room, "are you there?")
        answers = await ann.await_from(room, bot.user_id, 1)
        assert answers[0]["content"]["body"] == "still here"
        assert proxy.syncs >= before + 4  # three faults, then the sync that brought the message
        assert 1.5 in delays  # retry_after_ms, as the server asked
        assert delays[delays.index(1.5) + 1 :][:2] == [1.0, 2.0]  # then the backoff, doubling
        await quiet_for(2.0, "a second answer (the message offered twice) would have been sent by now")
        assert len(await ann.events(room, bot.user_id)) == 1
    finally:
        if app is not None:
            await app.stop()
        await proxy.stop()


async def test_a_sync_that_never_answers_is_given_up_and_retried(make_settings, synapse, matrix_user, human, models):
    models.responder(lambda request: Reply(text="back again"))
    proxy = FlakyHomeserver(synapse.url)
    url = await proxy.start()
    bot, ann = matrix_user("bot"), human("ann")
    delays: list[float] = []
    app = None
    try:
        app = await start_behind(url, make_settings, bot, delays, sync_timeout_ms=200)
        app.gate.access.update(lambda c: c.model_copy(update={"policy": "allowlist", "allowed_users": [ann.user.user_id]}))
        room = await ann.room(bot.user_id, direct=True)
        proxy.faults.append(("hang",))
        await eventually(lambda: not proxy.faults, "the hanging sync to be asked")
        await ann.say(room, "hello after the silence")
        answers = await ann.await_from(room, bot.user_id, 1, timeout=60)
        assert answers[0]["content"]["body"] == "back again"
        assert delays and delays[0] == 1.0  # the hung sync counted as a failure and was backed off
        log = json.dumps([r.messages for r in models.requests_for()])
        assert "hello after the silence" in log
    finally:
        if app is not None:
            await app.stop()
        await proxy.stop()


async def test_a_failed_join_is_tried_again_with_the_next_syncs(make_settings, synapse, matrix_user, human, models):
    models.responder(lambda request: Reply(text="joined at last"))
    proxy = FlakyHomeserver(synapse.url)
    url = await proxy.start()
    bot, ann = matrix_user("bot"), human("ann")
    delays: list[float] = []
    app = None
    try:
        app = await start_behind(url, make_settings, bot, delays)
        app.gate.access.update(lambda c: c.model_copy(update={"policy": "allowlist", "allowed_users": [ann.user.user_id]}))
        proxy.join_faults = 2
        room = await ann.room(bot.user_id, direct=True)  # returns once the bot has joined: on its third try
        assert proxy.join_faults == 0
        await ann.say(room, "hello")
        assert (await ann.await_from(room, bot.user_id))[0]["content"]["body"] == "joined at last"
    finally:
        if app is not None:
            await app.stop()
        await proxy.stop()
