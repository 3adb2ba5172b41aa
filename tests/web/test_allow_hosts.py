"""BICAMERAL_WEB_ALLOW_HOSTS: the owner's private hosts are reached by web_fetch, nothing else private is."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest
from pydantic import ValidationError

from bicameral.app.configs import web_fetch_tool
from bicameral.config import Settings
from bicameral.tools.base import ToolContext, ToolResult
from bicameral.tools.web import FetchArgs, WebFetch
from bicameral.web.address import allowance_policy
from bicameral.web.fetch import WebFetcher
from tests.web.conftest import Resolver, Site, serve_site

NOTES = "plain notes: the meeting moved to Thursday"


def _tool(tmp_path: Path, allow: str) -> WebFetch:
    return web_fetch_tool(Settings.for_test(tmp_path, web_allow_hosts=allow))


async def _fetch(tool: WebFetch, url: str, ctx: ToolContext) -> ToolResult:
    return await tool.run(FetchArgs(url=url), ctx)


@pytest.fixture
def other_site() -> Iterator[Site]:
    """A second server on 127.0.0.2: loopback too, but not the address the owner allowed."""
    yield from serve_site("127.0.0.2")


async def test_the_local_server_is_reached_only_when_allowed(site, tmp_path, ctx):
    url = site.url("/notes.txt", host="127.0.0.1")
    refused = await _fetch(_tool(tmp_path, ""), url, ctx)
    assert refused.is_error and "loopback" in refused.content and "allowed hosts" in refused.content
    assert site.seen == []
    allowed = await _fetch(_tool(tmp_path, "127.0.0.1"), url, ctx)
    assert not allowed.is_error and NOTES in allowed.content
    assert [path for path, _ in site.seen] == ["/notes.txt"]


async def test_other_private_addresses_stay_refused(site, other_site, tmp_path, ctx):
    tool = _tool(tmp_path, "127.0.0.1, nas.test")
    for url, reason in [
        (other_site.url("/notes.txt", host="127.0.0.2"), "loopback"),
        ("http://10.0.0.5/", "private"),
        ("http://192.168.1.1/", "private"),
        (f"http://[::1]:{site.port}/notes.txt", "loopback"),
        (site.url("/go?" + other_site.url("/notes.txt", host="127.0.0.2"), host="127.0.0.1"), "loopback"),
    ]:
        result = await _fetch(tool, url, ctx)
        assert result.is_error and reason in result.content, (url, result.content)
    assert other_site.seen == []


async def test_a_cidr_block_allows_its_addresses_but_never_the_metadata_one(other_site, tmp_path, ctx):
    tool = _tool(tmp_path, "127.0.0.0/8,169.254.0.0/16")
    reached = await _fetch(tool, other_site.url("/notes.txt", host="127.0.0.2"), ctx)
    assert not reached.is_error and NOTES in reached.content
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/"):
        result = await _fetch(tool, url, ctx)
        assert result.is_error and "cloud metadata" in result.content, (url, result.content)
    policy = allowance_policy(("169.254.0.0/16",))
    assert policy.refusal(ip_address("169.254.1.1")) is None
    assert policy.refusal(ip_address("169.254.170.2")) == "169.254.170.2 is a cloud metadata address"


async def test_a_name_is_allowed_whatever_it_resolves_to_except_metadata(site, tmp_path, ctx):
    settings = Settings.for_test(tmp_path, web_allow_hosts="NAS.test.")
    resolver = Resolver({"nas.test": [["127.0.0.1"]], "other.test": [["127.0.0.1"]], "meta.test": [["169.254.169.254"]]})
    tool = WebFetch(WebFetcher(policy=allowance_policy(settings.web_allow_hosts or ()), resolve=resolver))
    for host in ("nas.test", "Nas.Test."):
        result = await _fetch(tool, site.url("/notes.txt", host=host), ctx)
        assert not result.is_error and NOTES in result.content, (host, result.content)
    refused = await _fetch(tool, site.url("/notes.txt", host="other.test"), ctx)
    assert refused.is_error and "other.test points to a refused address" in refused.content
    # The name's allowance does not carry over to the address it resolves to.
    literal = await _fetch(tool, site.url("/notes.txt", host="127.0.0.1"), ctx)
    assert literal.is_error and "loopback" in literal.content
    assert len(site.seen) == 2
    meta_policy = allowance_policy(("meta.test",))
    assert meta_policy.refusal(ip_address("169.254.169.254"), "meta.test") == "169.254.169.254 is a cloud metadata address"
    assert meta_policy.refusal(ip_address("10.1.2.3"), "META.test") is None


@pytest.mark.parametrize(
    "entry", ["http://nas.local", "nas.local:8080", "10.0.0.300", "two words", "1.2.3.4/40", "-bad.example", "a..b"]
)
def test_a_broken_entry_stops_the_start_with_a_sentence(entry, tmp_path):
    with pytest.raises(ValidationError) as caught:
        Settings.for_test(tmp_path, web_allow_hosts=f"nas.local,{entry}")
    assert "is neither a host name (nas.local), an address (192.168.1.20) nor a CIDR block" in str(caught.value)


def test_entries_are_read_from_a_comma_separated_variable(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env or bicameral.toml of the developer's
    monkeypatch.setenv("BICAMERAL_WEB_ALLOW_HOSTS", " Home.Lan , 192.168.1.7/24,10.0.0.9,, fd00::/8 ")
    assert Settings().web_allow_hosts == ("home.lan", "192.168.1.0/24", "10.0.0.9/32", "fd00::/8")
    monkeypatch.setenv("BICAMERAL_WEB_ALLOW_HOSTS", "")
    assert Settings().web_allow_hosts == ()
