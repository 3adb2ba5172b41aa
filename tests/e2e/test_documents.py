"""A document sent in Telegram is read before the turn: the model gets its pages, the file tools its whole text."""

from __future__ import annotations

import json

from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.web.hostile import pdf, text_page

PAGES = ["Quarterly report for the Nordholm cooperative", "Revenue grew nine percent", "Costs fell by two percent"]


def _reader(req: Request) -> Reply:
    """Reads the whole text the envelope points at, then answers with what it found there."""
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[ToolCall("read_file", {"path": "report.pdf.txt"})])
    return Reply(text="The whole text: " + results[-1]["content"].replace("\n", " / "))


async def test_a_sent_pdf_reaches_the_model_with_page_markers_and_its_whole_text_in_the_workspace(
    telegram, models, start_bot
):
    models.responder(_reader)
    app = await start_bot()
    telegram.user_sends(OWNER, document=("report.pdf", pdf([text_page(p) for p in PAGES])), caption="what does it say?")
    sent = await telegram.await_sent(OWNER, 1, timeout=30)
    first = json.dumps(models.requests[0].raw)
    assert "--- page 1 ---\\nQuarterly report for the Nordholm cooperative\\n--- page 2 ---" in first
    assert "text_path=\\\"report.pdf.txt\\\"" in first and "what does it say?" in first
    assert "content=\\\"untrusted" not in first  # the owner's own file
    assert sent[0]["text"].startswith("The whole text: --- page 1 --- / Quarterly report")
    assert "Costs fell by two percent" in sent[0]["text"]
    [workspace] = (app.settings.data_dir / "workspaces").iterdir()
    assert (workspace / "report.pdf.txt").read_text().endswith("--- page 3 ---\nCosts fell by two percent")
