"""Tests for the secrets scrubber."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bicameral.redaction import _RULES, scrub, scrub_obj, without_password

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAn2Xl4r7cU0s1Ab8Jm6JkQ3dYl0rrCq1lQ3B5LrRj\n"
    "c2VjcmV0IGtleSBtYXRlcmlhbA==\n"
    "-----END RSA PRIVATE KEY-----"
)

SECRETS = {
    "anthropic_key": "sk-ant-api03-Abcdefghij_klmnopqrstuvwxyz0123456789-ABCDEFG",
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github_token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "slack_token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "aws_key_id": "AKIAIOSFODNN7EXAMPLE",
    "jwt": JWT,
    "private_key": PEM,
    "telegram_token": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
}


@pytest.mark.parametrize(("kind", "secret"), SECRETS.items())
def test_each_kind_is_redacted(kind: str, secret: str) -> None:
    text = f"before {secret} after"
    assert scrub(text) == f"before [REDACTED:{kind}] after"


@pytest.mark.parametrize(
    "token",
    [
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghu_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghr_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
    ],
)
def test_github_token_variants(token: str) -> None:
    assert scrub(token) == "[REDACTED:github_token]"


@pytest.mark.parametrize("prefix", ["xoxa", "xoxb", "xoxp", "xoxr", "xoxs"])
def test_slack_variants(prefix: str) -> None:
    assert scrub(f"{prefix}-1234567890-abcdef") == "[REDACTED:slack_token]"


def test_aws_session_key_id() -> None:
    assert scrub("id=ASIAY34FZKBOKMUTVV7A") == "id=[REDACTED:aws_key_id]"


def test_bearer_keeps_scheme_word() -> None:
    assert scrub("Authorization: Bearer abc123def456ghi789.jkl") == (
        "Authorization: Bearer [REDACTED:bearer]"
    )
    assert scrub("authorization: bearer abc123def456ghi789==") == (
        "authorization: bearer [REDACTED:bearer]"
    )


def test_bearer_with_jwt_reports_jwt() -> None:
    assert scrub(f"Bearer {JWT}") == "Bearer [REDACTED:jwt]"


def test_telegram_token_in_api_url() -> None:
    url = f"https://api.telegram.org/bot{SECRETS['telegram_token']}/sendMessage"
    assert scrub(url) == "https://api.telegram.org/bot[REDACTED:telegram_token]/sendMessage"


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "postgres://app:s3cr3t!@db.internal:5432/main",
            "postgres://app:[REDACTED:password]@db.internal:5432/main",
        ),
        ("redis://:hunter2@cache:6379/0", "redis://:[REDACTED:password]@cache:6379/0"),
        (
            "amqp+ssl://user:p:a:ss@mq.example.com",
            "amqp+ssl://user:[REDACTED:password]@mq.example.com",
        ),
        ("https://example.com:8443/path", "https://example.com:8443/path"),
        ("mailto:someone@example.com", "mailto:someone@example.com"),
    ],
)
def test_dsn_passwords(dsn: str, expected: str) -> None:
    assert scrub(dsn) == expected


def test_private_key_blocks() -> None:
    assert scrub(f"key:\n{PEM}\nthanks") == "key:\n[REDACTED:private_key]\nthanks"
    openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----"
    assert scrub(openssh) == "[REDACTED:private_key]"
    pkcs8 = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkq\n-----END ENCRYPTED PRIVATE KEY-----"
    assert scrub(pkcs8) == "[REDACTED:private_key]"


def test_truncated_private_key_is_redacted_to_the_end() -> None:
    assert scrub("look: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B") == (
        "look: [REDACTED:private_key]"
    )


def test_public_material_is_kept() -> None:
    cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert scrub(cert) == cert


@pytest.mark.parametrize(
    "text",
    [
        "The bearer of bad news arrived.",
        "Use Bearer tokens for auth.",
        "task-runner and disk-usage and sk-short",
        "AKIA is a prefix; AKIAshort is not a key.",
        "eyJ alone is fine, as is a.b.c",
        "Call me at 555123456: maybe later",
        "https://example.com/path?q=1",
        "[REDACTED:jwt] stays as it is",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert scrub(text) == text


def test_embedded_in_words_is_not_a_token_boundary() -> None:
    assert scrub("mask-ant-api03-abcdefghijklmnopqrstuvwxyz") == "mask-ant-api03-abcdefghijklmnopqrstuvwxyz"


def test_scrub_obj_recurses_and_keeps_other_types() -> None:
    update = {
        "update_id": 1,
        "message": {
            "text": f"my key is {SECRETS['openai_key']}",
            "entities": [{"type": "code", "offset": 10}],
            "flags": (True, None, 1.5, SECRETS["aws_key_id"]),
        },
        "list": [SECRETS["github_token"], ["nested", SECRETS["slack_token"]]],
    }
    assert scrub_obj(update) == {
        "update_id": 1,
        "message": {
            "text": "my key is [REDACTED:openai_key]",
            "entities": [{"type": "code", "offset": 10}],
            "flags": (True, None, 1.5, "[REDACTED:aws_key_id]"),
        },
        "list": ["[REDACTED:github_token]", ["nested", "[REDACTED:slack_token]"]],
    }
    assert update["message"]["text"].startswith("my key is sk-")  # input untouched


HOSTILE = {
    "jwt_prefixes": "eyJ" * 350_000,
    "jwt_segments": "eyJa." * 200_000,
    "digits": "1" * 1_000_000,
    "digit_colons": "1234567:" * 125_000,
    "sk_prefixes": "sk-" * 350_000,
    "bearers": "Bearer " * 150_000,
    "bearer_spaces": "Bearer" + " " * 1_000_000,
    "schemes": "a://" * 250_000,
    "users": "a://b:" * 170_000,
    "passwords": "x://u:" + "p:" * 500_000,
    "pem_begins": "-----BEGIN PRIVATE KEY-----" * 37_000,
    "pem_partial": "-----BEGIN " * 90_000,
    "akia": "AKIA" * 250_000,
    "ghp": "ghp_" * 250_000,
    "slack": "xoxb-" * 200_000,
    "letters": "a" * 1_000_000,
    "colons": ":" * 1_000_000,
    "mixed": "a:b@c/" * 170_000,
    "whitespace": " \t\n" * 330_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=list(HOSTILE))
def test_hostile_megabyte_inputs_complete(text: str) -> None:
    # Catastrophic backtracking would hang here; linear patterns finish in well under a second.
    assert len(scrub(text)) > 0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_scrub_is_idempotent(text: str) -> None:
    once = scrub(text)
    assert scrub(once) == once


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from(sorted(SECRETS.items())),
    st.text(max_size=40),
)
def test_secrets_never_survive_in_context(before: str, kind_secret: tuple[str, str], after: str) -> None:
    kind, secret = kind_secret
    result = scrub(f"{before} {secret} {after}")
    assert f"[REDACTED:{kind}]" in result
    assert secret not in result


def _every_rule(text: str) -> str:
    """scrub without its needle test: every pattern run over the text, in order."""
    for rule in _RULES:
        text = rule.pattern.sub(rule.replacement, text)
    return text


# Text built from the pieces credentials are made of, so matches and near-misses are common.
_PIECES = st.lists(
    st.sampled_from(
        ["sk-", "ant-", "eyJ", "gh", "p_", "github_pat_", "xoxb-", "AKIA", "ASIA", "Bearer", "BEARER", "bEaReR",
         "-----BEGIN ", "PRIVATE KEY-----", "-----END KEY-----", "://", "user", ":", "@", "1234567", "ABCDEFGHIJ",
         "abcdefghij0123456789", "_", "-", ".", " ", "\t", "\n", "é", "K"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_PIECES, st.text(max_size=80)))
def test_the_needle_test_skips_only_text_no_rule_would_change(text: str) -> None:
    assert scrub(text) == _every_rule(text)


@pytest.mark.parametrize("secret", SECRETS.values(), ids=list(SECRETS))
def test_every_secret_holds_its_rules_needle(secret: str) -> None:
    assert scrub(secret) == _every_rule(secret) != secret


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bot:s3cr%40t@db.lan:5432/bicameral", "postgresql://bot:***@db.lan:5432/bicameral"),
        ("postgresql://:only-a-password@[::1]:5432/db", "postgresql://:***@[::1]:5432/db"),
        ("postgresql://bot@db.lan/bicameral", "postgresql://bot@db.lan/bicameral"),  # nothing to hide
        ("postgresql://bot:pw@[::1/db", "(a URL that could not be read)"),  # malformed: nothing of it is shown
    ],
)
def test_a_database_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert without_password(url) == shown
