"""render_html and render_latex through a whole turn: the picture arrives at the fake Telegram as a photo, is kept in
the chat's workspace under renders/, and a formula KaTeX cannot read goes back to the model as KaTeX's error."""

from __future__ import annotations

import pytest

from bicameral.browser.chromium import Chromium
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, ToolCall
from tests.render import png

pytestmark = pytest.mark.skipif(bool(Chromium().why_off()), reason=Chromium().why_off() or "")

TABLE = '<table class="data"><tr><th>Item</th><th class="num">Qty</th></tr><tr><td>Milk</td><td class="num">2</td></tr></table>'


async def test_a_rendered_table_arrives_as_a_photo(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("render_html", {"html": TABLE, "width": 400, "title": "Groceries"})]),
        Reply(text="Here is the table."),
        model="back",
    )
    app = await start_bot(mode="single")
    telegram.user_sends(OWNER, "draw my groceries as a table")
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    assert [m["method"] for m in sent] == ["sendPhoto", "sendMessage"]
    picture = sent[0]["file_bytes"]
    assert png.size(picture)[0] == 800
    assert len(png.colours(picture)) > 10
    assert sent[0].get("caption") == "Groceries"
    [kept] = (app.settings.data_dir / "workspaces" / f"telegram_{OWNER}" / "renders").iterdir()
    assert kept.name.endswith("-groceries.png") and kept.read_bytes() == picture
    result = models.requests_for("back")[1].tool_results()[0]
    assert not result["is_error"] and "as a photo" in result["content"], result


async def test_bad_latex_goes_back_to_the_model_and_a_good_formula_arrives(telegram, models, start_bot):
    models.script(
        Reply(tool_calls=[ToolCall("render_latex", {"latex": r"\frac{1}{"})]),
        Reply(tool_calls=[ToolCall("render_latex", {"latex": r"e^{i\pi} + 1 = 0"})]),
        Reply(text="Euler's identity."),
        model="back",
    )
    await start_bot(mode="single")
    telegram.user_sends(OWNER, "show me Euler's identity")
    sent = await telegram.await_sent(OWNER, 2, timeout=60)
    assert [m["method"] for m in sent] == ["sendPhoto", "sendMessage"]
    assert len(png.colours(sent[0]["file_bytes"])) > 10
    error = models.requests_for("back")[1].tool_results()[0]
    # The OpenAI wire format has no error flag: the registry marks the content instead.
    assert error["content"].startswith("ERROR: KaTeX could not typeset it: KaTeX parse error"), error
