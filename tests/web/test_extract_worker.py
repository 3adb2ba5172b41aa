"""The extraction child stays lean: it loads its parsers and none of the app."""

from __future__ import annotations

import subprocess
import sys

from tests.web.hostile import pdf, text_page


def test_the_worker_reads_a_pdf_without_loading_the_app():
    argv = ["--cpu-seconds=10", f"--memory-bytes={512 << 20}", "--max-pages=5", "--max-chars=1000"]
    document = pdf([text_page("lean and mean")])
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bicameral.web.extract_worker", *argv],
        input=b"pdf %d\n" % len(document) + document,  # one job, then the end of input
        capture_output=True,
        timeout=60,
        check=True,
    )
    status, _, text = done.stdout.partition(b"\n")
    assert status.startswith(b"ok ") and text.decode().strip() == "lean and mean"
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    ours = sorted(name for name in loaded if name.startswith("bicameral"))
    assert ours == ["bicameral", "bicameral.imports", "bicameral.web"]  # the packages it lives in, and no more
    assert "pypdf" in loaded and "trafilatura" not in loaded and "httpx" not in loaded
