"""Which channels `bicameral run` serves, and the Matrix settings that cannot work, said before anything starts."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bicameral.app import configured_channels
from bicameral.app.configs import owner_chat, owners
from bicameral.config import Settings
from bicameral.errors import ConfigError
from bicameral.events import Owners, is_owner, owner_on

MATRIX = {"matrix_homeserver": "https://matrix.example.org", "matrix_user_id": "@bot:example.org",
          "matrix_password": SecretStr("pw")}


def names(settings: Settings) -> list[str]:
    return [channel.name for channel in configured_channels(settings)]


def test_matrix_alone_telegram_alone_or_both(tmp_path):
    assert names(Settings.for_test(tmp_path, **MATRIX)) == ["matrix"]
    assert names(Settings.for_test(tmp_path, telegram_token=SecretStr("1:abc"))) == ["telegram"]
    assert names(Settings.for_test(tmp_path, telegram_token=SecretStr("1:abc"), **MATRIX)) == ["telegram", "matrix"]
    with pytest.raises(ConfigError, match="BICAMERAL_MATRIX_HOMESERVER"):
        configured_channels(Settings.for_test(tmp_path))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"matrix_user_id": None}, "BICAMERAL_MATRIX_USER_ID is not"),
        ({"matrix_user_id": "bot"}, "full Matrix user id"),
        ({"matrix_homeserver": "matrix.example.org"}, "homeserver's URL"),
        ({"matrix_password": None}, "BICAMERAL_MATRIX_ACCESS_TOKEN or BICAMERAL_MATRIX_PASSWORD"),
    ],
)
def test_matrix_settings_that_cannot_work_are_refused(tmp_path, change, says):
    with pytest.raises(ConfigError, match=says):
        configured_channels(Settings.for_test(tmp_path, **{**MATRIX, **change}))


def test_the_owner_is_known_per_channel(tmp_path):
    from bicameral.events import Inbound, Sender

    settings = Settings.for_test(tmp_path, owner_id=1001, matrix_owner_id="@ann:example.org", **MATRIX)
    known = owners(settings)
    assert owner_on(known, "telegram") == "1001" and owner_on(known, "matrix") == "@ann:example.org"

    def said(channel: str, user: str) -> Inbound:
        return Inbound(channel, f"{channel}:room", "1", Sender(user, user), "hi", 0.0)

    assert is_owner(said("matrix", "@ann:example.org"), known) and is_owner(said("telegram", "1001"), known)
    assert not is_owner(said("matrix", "1001"), known)  # a Telegram number means nothing on Matrix
    assert not is_owner(said("telegram", "@ann:example.org"), known)
    assert is_owner(said("terminal", "anyone"), Owners())  # the local keyboard is the owner's
    assert is_owner(said("matrix", "1001"), 1001)  # a bare number still counts everywhere (tests, old callers)
    channels = configured_channels(settings)
    assert owner_chat(settings, channels) == "matrix:@ann:example.org"  # the first served channel that knows them
    both = Settings.for_test(tmp_path, owner_id=1001, telegram_token=SecretStr("1:abc"), **MATRIX)
    assert owner_chat(both, configured_channels(both)) == "telegram:1001"
