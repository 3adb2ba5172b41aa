"""Redact credentials from text before it is persisted, logged or shown: the one redactor."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

# Shorter configured values are too likely to occur in ordinary text to be replaced blindly.
_MIN_SECRET_LENGTH = 6


def scrub(text: str) -> str:
    """Replace anything that looks like a credential with a [REDACTED:<kind>] marker."""
    for rule in _RULES:
        haystack = text.lower() if rule.folded else text
        # A substring test is far cheaper than a regex scan, and ordinary text holds none of the needles.
        for needle in rule.needles:
            if needle in haystack:
                text = rule.pattern.sub(rule.replacement, text)
                break
    return text


class Redactor:
    """Replaces the configured secret values, then anything that looks like a credential."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return scrub(text)


def scrub_obj(obj: Any, redact: Callable[[str], str] = scrub) -> Any:
    """Return a copy of a JSON-like structure with every string value redacted."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {key: scrub_obj(value, redact) for key, value in obj.items()}
    if isinstance(obj, list):
        return [scrub_obj(item, redact) for item in obj]
    if isinstance(obj, tuple):
        return tuple(scrub_obj(item, redact) for item in obj)
    return obj


# Linear time matters: scrub runs on untrusted text of any size. Every pattern either starts
# with a literal, or with a lookbehind that only admits the first character of a run, so
# the engine begins at most one attempt per run; possessive quantifiers (++, *+) stop it
# from backtracking within that attempt.
_B = r"(?<![A-Za-z0-9_-])"  # token boundary: not preceded by a token character


def _redacted(kind: str) -> str:
    return f"[REDACTED:{kind}]"


REDACTED = _redacted("secret")
"""What a configured secret value becomes."""


class _Rule(NamedTuple):
    pattern: re.Pattern[str]
    replacement: str
    needles: tuple[str, ...]  # every match contains one of these, so text without them is skipped
    folded: bool = False  # the needles are looked for in the lower-cased text (a case-blind pattern)


_RULES: list[_Rule] = [
    # PEM private keys; an unterminated block (truncated paste) is redacted to the end.
    _Rule(
        re.compile(
            r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?!-----END)[\s\S])*+"
            r"(?:-----END[A-Z0-9 ]{0,60}-----)?"
        ),
        _redacted("private_key"),
        ("-----BEGIN ",),
    ),
    # scheme://user:password@host keeps everything but the password.
    _Rule(
        re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*+://[^\s:/@]*+):[^\s/@]++@"),
        r"\1:" + _redacted("password") + "@",
        ("://",),
    ),
    _Rule(re.compile(_B + r"eyJ[A-Za-z0-9_-]++\.[A-Za-z0-9_-]++\.[A-Za-z0-9_-]*+"), _redacted("jwt"), ("eyJ",)),
    _Rule(re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}+"), _redacted("anthropic_key"), ("sk-ant-",)),
    _Rule(re.compile(_B + r"sk-[A-Za-z0-9_-]{20,}+"), _redacted("openai_key"), ("sk-",)),
    _Rule(
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+)"),
        _redacted("github_token"),
        ("_",),
    ),
    _Rule(re.compile(_B + r"xox[abprs]-[A-Za-z0-9-]{10,}+"), _redacted("slack_token"), ("xox",)),
    _Rule(
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"), _redacted("aws_key_id"), ("AKIA", "ASIA")
    ),
    # Bot tokens often follow "bot" in API URLs, so only digits may not precede them.
    _Rule(re.compile(r"(?<![0-9])[0-9]{6,12}:[A-Za-z0-9_-]{30,}+"), _redacted("telegram_token"), (":",)),
    # Last, so specific kinds above win; 16+ chars keeps prose like "Bearer tokens" intact.
    _Rule(
        re.compile(r"(?i)(?<![A-Za-z0-9])(bearer)[ \t]++[A-Za-z0-9._~+/-]{16,}+=*+"),
        r"\1 " + _redacted("bearer"),
        ("bearer",),
        folded=True,
    ),
]


def without_password(url: str) -> str:
    """A URL (a database's) as a message may show it: any password replaced by ***."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return "(a URL that could not be read)"
    user, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}"))
