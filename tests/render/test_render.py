"""Rendering in the real Chromium: a table and a formula come out as PNGs with ink, KaTeX's fonts load from the
bundle, nothing on the page reaches a file or the network, and a page that will not finish is cut off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bicameral.browser.chromium import Chromium
from bicameral.browser.render import Renderer, RenderFailed, RenderLimits
from tests.render import png
from tests.web.conftest import Site, serve_site

TABLE = """<h1>Quarter</h1><table class="data"><thead><tr><th>Month</th><th class="num">Sales</th></tr></thead>
<tbody><tr><td>April</td><td class="num">1,204</td></tr><tr><td>May</td><td class="num">1,377</td></tr></tbody></table>"""

KATEX_FACES = """async () => {
  await document.fonts.ready;
  return [...document.fonts].filter(f => f.family.includes('KaTeX')).map(f => [f.family.replaceAll('"', ''), f.status]);
}"""


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve_site()


def _has_ink(picture: bytes) -> None:
    colours = png.colours(picture)
    # Text is drawn anti-aliased: a page with words on it has many shades, a blank one has one.
    assert len(colours) > 10, f"the picture is nearly one colour: {len(colours)} colours"


async def test_an_html_table_renders_with_ink(chromium: Chromium) -> None:
    rendered = await Renderer(chromium).html(TABLE, width=400, height=100)
    assert png.size(rendered.png) == (rendered.width, rendered.height)
    width, height = png.size(rendered.png)
    assert width == 800  # 400 CSS pixels at scale 2
    assert 200 < height < 1000, height  # the whole table, taller than the 100-pixel viewport
    assert not rendered.clipped
    _has_ink(rendered.png)


async def test_a_tall_page_is_cut_at_the_maximum_height(chromium: Chromium) -> None:
    limits = RenderLimits(max_height=500, scale=1)
    rendered = await Renderer(chromium, limits).html('<div style="height:5000px">tall</div>', width=320)
    assert png.size(rendered.png) == (320, 500)
    assert rendered.clipped


async def test_a_formula_renders_with_katex_fonts_from_the_bundle(chromium: Chromium) -> None:
    renderer = Renderer(chromium)
    latex = r"\int_0^1 x^2\,dx = \frac{1}{3} + \sum_{n=1}^{\infty} \frac{1}{n^2}"
    faces = (await renderer.latex(latex, probe=KATEX_FACES)).probe
    used = {family for family, status in faces if status == "loaded"}
    assert {"KaTeX_Main", "KaTeX_Math", "KaTeX_Size2"} <= used, faces  # letters, italics, the big integral and sum
    assert not [face for face in faces if face[1] == "error"], faces
    rendered = await renderer.latex(latex)
    assert rendered.probe == ""  # no KaTeX error
    width, height = png.size(rendered.png)
    assert 100 < width < 2000 and 50 < height < 600, (width, height)
    _has_ink(rendered.png)


async def test_bad_latex_gives_katex_s_error(chromium: Chromium) -> None:
    rendered = await Renderer(chromium).latex(r"\frac{1}{")
    assert "KaTeX parse error" in rendered.probe
    assert rendered.png == b""


async def test_a_formula_cannot_close_its_script(chromium: Chromium) -> None:
    rendered = await Renderer(chromium).latex(r"x</script><script>document.title='escaped'</script>", probe="document.title")
    assert rendered.probe != "escaped"


async def test_the_page_reaches_no_file_and_no_address(chromium: Chromium, site: Site) -> None:
    local = f"http://127.0.0.1:{site.port}"
    html = f"""<h1>probe</h1>
<img src="file:///etc/passwd"><img src="{local}/picture.png"><img src="https://example.com/logo.png">
<img src="http://10.0.0.1/x.png"><img src="http://169.254.169.254/latest/meta-data/">
<iframe src="file:///etc/passwd"></iframe><iframe src="{local}/page.html"></iframe>
<link rel="stylesheet" href="{local}/style.css"><script src="{local}/script.js"></script>
<link rel="prefetch" href="{local}/prefetch"><link rel="preconnect" href="{local}">
<script>
const tries = {{file: "file:///etc/passwd", local: "{local}/notes.txt", remote: "https://example.com/",
  private: "http://192.168.1.1/", socket: "ws://127.0.0.1:{site.port}/ws"}};
window.results = {{}};
window.done = Promise.all(Object.entries(tries).map(([name, url]) => name === "socket"
  ? new Promise(settle => {{ try {{ const s = new WebSocket(url); s.onopen = () => {{ results[name] = "open"; settle(); }};
      s.onclose = () => {{ results[name] = results[name] || "refused"; settle(); }}; }}
      catch (e) {{ results[name] = "refused"; settle(); }} }})
  : fetch(url).then(r => r.text())
      .then(t => {{ results[name] = "got " + t.slice(0, 40); }}, () => {{ results[name] = "refused"; }})));
navigator.sendBeacon && navigator.sendBeacon("{local}/beacon", "x");
</script>"""
    probe = """async () => { await window.done;
      return {results: window.results, images: [...document.images].map(i => i.naturalWidth), text: document.body.innerText}; }"""
    rendered = await Renderer(chromium).html(html, width=400, probe=probe)
    found = rendered.probe
    assert found["results"] == dict.fromkeys(("file", "local", "remote", "private", "socket"), "refused"), found
    assert found["images"] == [0, 0, 0, 0, 0]
    assert "root:" not in found["text"]
    assert site.seen == []  # the local server got no request at all
    _has_ink(rendered.png)


async def test_an_endless_script_is_cut_off(chromium: Chromium) -> None:
    renderer = Renderer(chromium, RenderLimits(timeout_seconds=2))
    with pytest.raises(RenderFailed, match="I stopped the render: it was still loading or running after 2 s"):
        await renderer.html("<p>spin</p><script>while (true) {}</script>")
    # The browser is still good for the next render.
    assert png.size((await renderer.html("<p>after</p>", width=320)).png)[0] == 640


async def test_a_page_that_never_finishes_loading_is_cut_off(chromium: Chromium) -> None:
    renderer = Renderer(chromium, RenderLimits(timeout_seconds=2))
    endless = "<p>wait</p><script>document.write('<script>while (Date.now() > 0) {}<\\/script>')</script>"
    with pytest.raises(RenderFailed, match="still loading or running"):
        await renderer.html(endless)


async def test_a_hundred_popups_are_cut_off(chromium: Chromium) -> None:
    renderer = Renderer(chromium, RenderLimits(timeout_seconds=20))
    with pytest.raises(RenderFailed, match="I stopped the render: it opened more than 5 windows"):
        await renderer.html("<p>pop</p><script>for (let i = 0; i < 100; i++) window.open('about:blank#' + i);</script>")
