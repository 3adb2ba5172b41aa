"""The one warm Chromium: started on first use (once for concurrent uses), closed when idle, restarted after a crash."""

from __future__ import annotations

import asyncio
import signal
import socket

import psutil
import pytest

from bicameral.browser.chromium import Chromium, ChromiumOff
from tests.support.chat import eventually


def _browser_processes() -> list[psutil.Process]:
    """Our own Chromium main processes (children of this test's process tree, not other users of the machine)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].endswith("chromium") and not any(arg.startswith("--type=") for arg in cmdline):
            found.append(child)
    return found


async def test_concurrent_first_uses_start_one_browser(chromium: Chromium) -> None:
    contexts = await asyncio.gather(*(chromium.new_context() for _ in range(4)))
    assert chromium.launches == 1
    assert len(_browser_processes()) == 1
    for context in contexts:
        page = await context.new_page()
        await page.set_content("<p>hi</p>")
        assert await page.inner_text("p") == "hi"
        await context.close()


async def test_closes_when_idle_and_starts_again() -> None:
    chromium = Chromium(idle_seconds=0.2)
    if why := chromium.why_off():
        pytest.skip(why)
    try:
        context = await chromium.new_context()
        assert chromium.running
        await context.close()
        await eventually(lambda: not chromium.running and not _browser_processes(), "the idle browser closed")
        context = await chromium.new_context()
        assert chromium.launches == 2
        assert chromium.running
        await context.close()
    finally:
        await chromium.aclose()


async def test_an_open_context_keeps_it_warm(chromium: Chromium) -> None:
    # With a context open the idle timer is not armed, however long it stays open.
    context = await chromium.new_context()
    assert chromium._timer is None
    await context.close()
    assert chromium._timer is not None


async def test_a_crashed_browser_is_replaced_on_next_use(chromium: Chromium) -> None:
    context = await chromium.new_context()
    [process] = _browser_processes()
    process.send_signal(signal.SIGKILL)
    await eventually(lambda: not chromium.running, "the crash noticed")
    context = await chromium.new_context()
    page = await context.new_page()
    await page.set_content("<p>again</p>")
    assert await page.inner_text("p") == "again"
    assert chromium.launches == 2
    await context.close()


async def test_why_off_names_a_missing_binary(tmp_path) -> None:
    chromium = Chromium(tmp_path / "no-chromium")
    assert not chromium.available()
    assert "not installed at" in (chromium.why_off() or "")
    with pytest.raises(ChromiumOff, match="not installed"):
        await chromium.new_context()


STUN = """async (server) => {
  const pc = new RTCPeerConnection({iceServers: [{urls: server}]});
  pc.createDataChannel("x");
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise(done => {
    pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && done();
    setTimeout(done, 3000);
  });
  pc.close();
}"""


@pytest.mark.parametrize("options", [{}, {"proxy": {"server": "http://127.0.0.1:9"}}], ids=["direct", "proxied"])
async def test_webrtc_sends_nothing_past_the_context_s_proxy(chromium: Chromium, options: dict) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stun:
        stun.bind(("127.0.0.1", 0))
        context = await chromium.new_context(**options)
        page = await context.new_page()
        await page.evaluate(STUN, f"stun:127.0.0.1:{stun.getsockname()[1]}")
        await context.close()
        stun.setblocking(False)
        with pytest.raises(BlockingIOError):
            stun.recvfrom(2048)  # no STUN binding request arrived
