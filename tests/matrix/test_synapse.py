"""The test homeserver itself: it answers, and its admin API registers users who can log in."""

from __future__ import annotations

import httpx


def test_registered_users_are_known_to_the_homeserver(synapse, matrix_user):
    ann = matrix_user("ann", "Ann")
    whoami = httpx.get(
        f"{synapse.url}/_matrix/client/v3/account/whoami",
        headers={"Authorization": f"Bearer {ann.access_token}"},
        timeout=10,
    )
    assert whoami.json()["user_id"] == ann.user_id
    login = httpx.post(
        f"{synapse.url}/_matrix/client/v3/login",
        json={"type": "m.login.password", "identifier": {"type": "m.id.user", "user": ann.user_id}, "password": ann.password},
        timeout=10,
    )
    assert login.status_code == 200 and login.json()["user_id"] == ann.user_id
