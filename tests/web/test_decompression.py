"""Compressed bodies are decoded layer by layer with every layer bounded while it decodes, not after."""

from __future__ import annotations

import gzip
import os
import re
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from bicameral.web.fetch import FetchFailed
from tests.web.conftest import ARTICLE, local_fetcher
from tests.web.hostile import double_gzip_bomb

MIB = 1 << 20


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """This process's highest RSS while the block runs, sampled on a thread; [before, peak] after it."""
    me = psutil.Process(os.getpid())
    figures = [me.memory_info().rss, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            figures[1] = max(figures[1], me.memory_info().rss)
            stop.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield figures
    finally:
        stop.set()
        sampler.join()


async def test_a_double_gzip_bomb_is_refused_before_it_fills_memory(site):
    bomb = double_gzip_bomb()
    assert len(bomb) < 10_000  # a few kilobytes on the wire
    site.serve("/bomb2", bomb, "text/html", Content_Encoding="gzip, gzip")
    with peak_rss() as figures, pytest.raises(FetchFailed, match="larger than the 2,000,000-byte limit"):
        await local_fetcher().fetch(site.url("/bomb2"))
    before, peak = figures
    assert peak - before < 100 * MIB, f"RSS grew by {(peak - before) / MIB:.0f} MiB"


async def test_a_middle_layer_is_bounded_even_when_the_result_is_small(site):
    # The outer layer yields 3 MB: a tiny gzip member, then junk the inner layer never reads.
    body = gzip.compress(gzip.compress(b"hi") + bytes(3_000_000))
    site.serve("/layers", body, "text/plain", Content_Encoding="gzip, gzip")
    with pytest.raises(FetchFailed, match="larger than the 2,000,000-byte limit once decompressed"):
        await local_fetcher().fetch(site.url("/layers"))


async def test_gzip_deflate_and_raw_deflate_bodies_are_read(site):
    text = ARTICLE.encode()
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    bodies = {
        "/gz": (gzip.compress(text), "gzip"),
        "/twice": (gzip.compress(zlib.compress(text)), "deflate, gzip"),
        "/deflate": (zlib.compress(text), "deflate"),
        "/raw-deflate": (raw.compress(text) + raw.flush(), "deflate"),
        "/plain": (text, "identity"),
    }
    fetcher = local_fetcher()
    for path, (body, encoding) in bodies.items():
        site.serve(path, body, "text/html", Content_Encoding=encoding)
        page = await fetcher.fetch(site.url(path))
        assert page.body == text, path


async def test_a_large_page_that_compresses_well_is_read_whole(site):
    text = b"line of text\n" * 150_000  # 1.95 MB, under the limit; many pieces through each layer
    site.serve("/long", gzip.compress(gzip.compress(text)), "text/plain", Content_Encoding="gzip, gzip")
    assert (await local_fetcher().fetch(site.url("/long"))).body == text


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("br", "answered in br content encoding, which web_fetch does not decode"),
        ("zstd", "answered in zstd content encoding, which web_fetch does not decode"),
        ("gzip, gzip, gzip, gzip", "4 layers of content encoding (at most 3 are decoded)"),
    ],
)
async def test_an_encoding_we_do_not_decode_is_refused_by_name(site, encoding, said):
    site.serve("/encoded", b"\x00" * 100, "text/plain", Content_Encoding=encoding)
    with pytest.raises(FetchFailed, match=re.escape(said)):
        await local_fetcher().fetch(site.url("/encoded"))


async def test_a_body_that_is_not_what_its_encoding_says_is_refused(site):
    site.serve("/fake-gzip", b"this is not gzip at all", "text/plain", Content_Encoding="gzip")
    with pytest.raises(FetchFailed, match="not valid gzip"):
        await local_fetcher().fetch(site.url("/fake-gzip"))
