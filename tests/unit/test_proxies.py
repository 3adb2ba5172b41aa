"""Which proxy a request goes through, read from the proxy variables as curl reads them."""

from __future__ import annotations

import pytest

from bicameral.errors import ConfigError
from bicameral.net import Proxies, ProxyRoute

HTTPS = {"HTTPS_PROXY": "http://secure-proxy:3128"}
HTTP = {"HTTP_PROXY": "http://plain-proxy:8080"}


def _route(environ: dict[str, str], scheme: str = "https", host: str = "api.example.com", port: int = 443) -> ProxyRoute | None:
    return Proxies.from_environment(environ).for_url(scheme, host, port)


def _goes_direct(no_proxy: str, host: str, port: int = 443) -> bool:
    return _route({**HTTPS, "NO_PROXY": no_proxy}, host=host, port=port) is None


# Which variable applies


def test_none_and_an_empty_environment_send_everything_direct() -> None:
    for proxies in (Proxies.none(), Proxies.from_environment({})):
        assert proxies.for_url("https", "api.example.com", 443) is None
        assert proxies.for_url("http", "api.example.com", 80) is None


def test_https_proxy_serves_https_only_and_http_proxy_http_only() -> None:
    assert _route(HTTPS, "https") == ProxyRoute("http", "secure-proxy", 3128)
    assert _route(HTTPS, "http", port=80) is None
    assert _route(HTTP, "http", port=80) == ProxyRoute("http", "plain-proxy", 8080)
    assert _route(HTTP, "https") is None


def test_all_proxy_serves_both_schemes_unless_a_scheme_has_its_own() -> None:
    every = {"ALL_PROXY": "http://every-proxy:1"}
    assert _route(every, "https") == ProxyRoute("http", "every-proxy", 1)
    assert _route(every, "http", port=80) == ProxyRoute("http", "every-proxy", 1)
    assert _route({**every, **HTTPS}, "https") == ProxyRoute("http", "secure-proxy", 3128)
    assert _route({**every, **HTTPS}, "http", port=80) == ProxyRoute("http", "every-proxy", 1)


@pytest.mark.parametrize("variable", ["https_proxy", "http_proxy", "all_proxy"])
def test_the_lower_case_spelling_wins_over_the_upper_case_one(variable: str) -> None:
    environ = {variable.upper(): "http://upper:1", variable: "http://lower:2"}
    scheme = "http" if variable == "http_proxy" else "https"
    assert _route(environ, scheme) == ProxyRoute("http", "lower", 2)


def test_either_spelling_alone_is_read() -> None:
    assert _route({"https_proxy": "http://lower:2"}) == ProxyRoute("http", "lower", 2)
    assert _route({"HTTP_PROXY": "http://upper:1"}, "http", port=80) == ProxyRoute("http", "upper", 1)


def test_an_empty_or_blank_value_counts_as_unset_as_in_curl() -> None:
    assert _route({"https_proxy": "", "HTTPS_PROXY": "http://upper:1"}) == ProxyRoute("http", "upper", 1)
    assert _route({"HTTPS_PROXY": "   "}) is None
    assert _route({"HTTPS_PROXY": "", "ALL_PROXY": "http://every:3"}) == ProxyRoute("http", "every", 3)


def test_the_no_proxy_lower_case_spelling_wins_too() -> None:
    environ = {**HTTPS, "NO_PROXY": "other.org", "no_proxy": "example.com"}
    assert _route(environ, host="api.example.com") is None
    assert _route(environ, host="api.other.org") is not None


def test_other_schemes_never_use_a_proxy() -> None:
    assert _route({**HTTPS, **HTTP, "ALL_PROXY": "http://every:1"}, "ftp", port=21) is None


def test_the_scheme_is_matched_without_regard_to_case() -> None:
    assert _route(HTTPS, "HTTPS") == ProxyRoute("http", "secure-proxy", 3128)


# Reading a proxy URL


def test_a_proxy_without_a_scheme_is_http() -> None:
    assert _route({"HTTPS_PROXY": "proxy.internal:3128"}) == ProxyRoute("http", "proxy.internal", 3128)


def test_a_proxy_without_a_port_uses_port_80() -> None:
    assert _route({"HTTPS_PROXY": "http://proxy.internal"}) == ProxyRoute("http", "proxy.internal", 80)
    assert _route({"HTTPS_PROXY": "proxy.internal/"}) == ProxyRoute("http", "proxy.internal", 80)


def test_the_scheme_and_host_are_read_without_regard_to_case_and_surrounding_space() -> None:
    assert _route({"HTTPS_PROXY": "  HTTP://Proxy.Internal:3128/  "}) == ProxyRoute("http", "proxy.internal", 3128)


def test_an_ipv6_proxy_address_loses_its_brackets() -> None:
    assert _route({"HTTPS_PROXY": "http://[::1]:3128"}) == ProxyRoute("http", "::1", 3128)


def test_credentials_are_percent_decoded() -> None:
    route = _route({"HTTPS_PROXY": "http://al%20ice:p%40ss%3Aw%C3%B6rd@proxy:3128"})
    assert route == ProxyRoute("http", "proxy", 3128, ("al ice", "p@ss:wörd"))


def test_a_user_without_a_password_has_an_empty_one() -> None:
    assert _route({"HTTPS_PROXY": "http://alice@proxy:3128"}) == ProxyRoute("http", "proxy", 3128, ("alice", ""))


def test_no_user_means_no_credentials() -> None:
    route = _route({"HTTPS_PROXY": "http://proxy:3128"})
    assert route is not None and route.auth is None


def test_credentials_stay_out_of_the_repr_and_the_url() -> None:
    proxies = Proxies.from_environment({"HTTPS_PROXY": "socks5://alice:hunter2@proxy:1080"})
    route = proxies.for_url("https", "api.example.com", 443)
    assert route is not None and route.auth == ("alice", "hunter2")
    for shown in (repr(route), repr(proxies), route.url):
        assert "hunter2" not in shown and "alice" not in shown
    assert route.url == "socks5://proxy:1080"


@pytest.mark.parametrize("scheme", ["socks5", "socks5h", "SOCKS5H"])
def test_socks5_proxies_are_read_with_their_own_default_port(scheme: str) -> None:
    assert _route({"ALL_PROXY": f"{scheme}://proxy"}) == ProxyRoute(scheme.lower(), "proxy", 1080)
    assert _route({"HTTP_PROXY": f"{scheme}://u:p@proxy:9050"}, "http", port=80) == ProxyRoute(
        scheme.lower(), "proxy", 9050, ("u", "p")
    )


def test_an_ipv6_proxy_keeps_its_brackets_in_the_url() -> None:
    route = _route({"HTTPS_PROXY": "socks5h://[::1]:9050"})
    assert route is not None and route.host == "::1" and route.url == "socks5h://[::1]:9050"


# Proxies that cannot be used


@pytest.mark.parametrize("scheme", ["socks4", "socks4a", "https", "ftp"])
@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
def test_a_proxy_scheme_we_cannot_speak_is_a_config_error_naming_the_variable(scheme: str, variable: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Proxies.from_environment({variable: f"{scheme}://alice:hunter2@proxy:1080"})
    message = str(refused.value)
    assert variable in message and f"{scheme}://" in message and "http://" in message and "socks5://" in message
    assert "\n" not in message and "hunter2" not in message


def test_the_error_names_the_spelling_that_was_read() -> None:
    with pytest.raises(ConfigError, match=r"^https_proxy "):
        Proxies.from_environment({"HTTPS_PROXY": "http://fine:1", "https_proxy": "socks4://proxy:1080"})


def test_a_variable_shadowed_by_another_spelling_or_a_scheme_of_its_own_is_not_judged() -> None:
    shadowed = {"HTTPS_PROXY": "socks4://proxy:1080", "https_proxy": "http://fine:1"}
    assert _route(shadowed) == ProxyRoute("http", "fine", 1)
    unused_all = {**HTTPS, **HTTP, "ALL_PROXY": "socks4://proxy:1080"}
    assert _route(unused_all) == ProxyRoute("http", "secure-proxy", 3128)


@pytest.mark.parametrize("value", ["http://", "http://:3128", "http://proxy:port", "http://proxy:99999"])
def test_a_proxy_url_without_a_usable_host_or_port_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="HTTPS_PROXY"):
        Proxies.from_environment({"HTTPS_PROXY": value})


# NO_PROXY


def test_a_star_sends_everything_direct() -> None:
    assert _goes_direct("*", "api.example.com")
    assert _route({**HTTP, "no_proxy": "*"}, "http", port=80) is None
    assert _goes_direct("internal.corp, *", "api.example.com")


def test_a_domain_matches_itself_and_every_subdomain() -> None:
    for entry in ("example.com", ".example.com", "*.example.com", "EXAMPLE.com", "example.com."):
        for host in ("example.com", "api.example.com", "deep.api.example.com", "API.Example.COM", "api.example.com."):
            assert _goes_direct(entry, host), (entry, host)


def test_a_domain_does_not_match_a_name_that_merely_ends_like_it() -> None:
    for host in ("notexample.com", "example.com.evil.net", "example.co", "com"):
        assert not _goes_direct("example.com", host), host


def test_entries_are_comma_separated_with_spaces_and_empty_entries_ignored() -> None:
    no_proxy = " internal.corp , ,example.com,,  "
    assert _goes_direct(no_proxy, "api.example.com")
    assert _goes_direct(no_proxy, "git.internal.corp")
    assert not _goes_direct(no_proxy, "api.other.org")


def test_an_entry_with_a_port_matches_that_port_only() -> None:
    assert _goes_direct("example.com:8443", "api.example.com", 8443)
    assert not _goes_direct("example.com:8443", "api.example.com", 443)
    assert _goes_direct("127.0.0.1:8080", "127.0.0.1", 8080)
    assert not _goes_direct("127.0.0.1:8080", "127.0.0.1", 8081)
    assert _goes_direct("[::1]:8080", "::1", 8080)
    assert not _goes_direct("[::1]:8080", "::1", 8081)


def test_an_address_matches_that_address_only() -> None:
    assert _goes_direct("127.0.0.1", "127.0.0.1")
    assert not _goes_direct("127.0.0.1", "127.0.0.2")
    assert not _goes_direct("10.0.0.1", "110.0.0.1")


def test_ipv6_addresses_match_with_or_without_brackets() -> None:
    for entry in ("::1", "[::1]"):
        for host in ("::1", "[::1]", "0:0:0:0:0:0:0:1"):
            assert _goes_direct(entry, host), (entry, host)
    assert not _goes_direct("::1", "::2")


def test_a_cidr_block_matches_the_addresses_inside_it() -> None:
    assert _goes_direct("10.0.0.0/8", "10.1.2.3")
    assert _goes_direct("10.0.0.0/8", "10.255.255.255")
    assert not _goes_direct("10.0.0.0/8", "11.0.0.1")
    assert _goes_direct("192.168.1.7/24", "192.168.1.200")
    assert _goes_direct("fd00::/8", "fd12:3456::1")
    assert not _goes_direct("fd00::/8", "fe80::1")
    assert not _goes_direct("10.0.0.0/8", "::ffff:11.0.0.1")


def test_names_are_never_resolved_so_an_address_entry_does_not_match_a_name() -> None:
    assert not _goes_direct("127.0.0.1", "localhost")
    assert not _goes_direct("127.0.0.0/8", "localhost")
    assert _goes_direct("localhost", "localhost")


def test_a_domain_entry_is_not_a_suffix_of_an_address() -> None:
    assert not _goes_direct("0.0.1", "10.0.0.1")
    assert not _goes_direct("1", "10.0.0.1")


def test_entries_that_mean_nothing_are_skipped_not_fatal() -> None:
    no_proxy = "10.0.0.0/33,example.com:notaport,[::1]junk,example.com"
    assert _goes_direct(no_proxy, "api.example.com")
    assert not _goes_direct(no_proxy, "10.0.0.1")


def test_no_proxy_applies_to_both_schemes_and_to_all_proxy() -> None:
    environ = {"ALL_PROXY": "http://every:1", "NO_PROXY": "example.com"}
    assert _route(environ, "https") is None
    assert _route(environ, "http", port=80) is None
    assert _route(environ, "https", host="api.other.org") == ProxyRoute("http", "every", 1)


def test_no_proxy_alone_changes_nothing() -> None:
    assert _route({"NO_PROXY": "example.com"}, host="api.other.org") is None
