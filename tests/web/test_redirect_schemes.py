"""A redirect to a scheme other than http(s), or to a malformed address, gets its own clear refusal."""

from __future__ import annotations

import re

import pytest

from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.address import AddressRefused
from bicameral.web.fetch import FetchFailed
from tests.web.conftest import local_fetcher


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("data:text/html,<script>alert(1)</script>", "data"),
        ("data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "data"),
        ("jar:http://site.test/evil.jar!/a.class", "jar"),
        ("javascript:alert(document.cookie)", "javascript"),
        ("JavaScript:alert(1)", "javascript"),
        ("ftp://site.test/file.txt", "ftp"),
        ("mailto:someone@example.com", "mailto"),
        ("file:///etc/passwd", "file"),
    ],
)
async def test_a_redirect_to_another_scheme_is_refused_by_name(site, location, scheme):
    site.redirect("/redirect", location)
    with pytest.raises(AddressRefused) as refused:
        await local_fetcher().fetch(site.url("/redirect"))
    said = str(refused.value)
    assert f"redirected to a {scheme}: URL, which web_fetch does not follow" in said
    assert "alert" not in said and "base64" not in said  # the content of the URL is not repeated
    assert [path for path, _ in site.seen] == ["/redirect"]


@pytest.mark.parametrize("location", ["http://[::1", "http://exa mple.test:x/", "http://[not-an-address]/"])
async def test_a_malformed_location_is_named_as_such(site, location):
    site.redirect("/redirect", location)
    with pytest.raises(FetchFailed, match="redirected to a malformed address"):
        await local_fetcher().fetch(site.url("/redirect"))
    assert [path for path, _ in site.seen] == ["/redirect"]


async def test_a_port_past_65535_is_refused_in_a_redirect_and_in_the_url_asked_for(site):
    site.redirect("/redirect", "https://site.test:99999/")
    with pytest.raises(AddressRefused, match=re.escape("it redirected to https://site.test:99999/, and port 99999 does not")):
        await local_fetcher().fetch(site.url("/redirect"))
    with pytest.raises(AddressRefused, match="port 99999 does not exist"):
        await local_fetcher().fetch("http://site.test:99999/")


async def test_the_tool_reports_the_refusal_and_keeps_serving(site, ctx):
    site.redirect("/redirect", "data:text/plain,hello")
    tool = WebFetch(local_fetcher())
    refused = await tool.run(FetchArgs(url=site.url("/redirect")), ctx)
    assert refused.is_error and "redirected to a data: URL, which web_fetch does not follow" in refused.content
    assert not (await tool.run(FetchArgs(url=site.url("/notes.txt")), ctx)).is_error
