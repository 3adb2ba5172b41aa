"""`bicameral doctor` on Matrix: the homeserver answers and the account logs in, or it says which is wrong."""

from __future__ import annotations

import io

from pydantic import SecretStr
from rich.console import Console

from bicameral.doctor import _matrix, run_checks


async def test_doctor_checks_the_homeserver_and_the_login(make_settings, synapse, matrix_user):
    bot = matrix_user("bot")
    by_password = make_settings(matrix_homeserver=synapse.url, matrix_user_id=bot.user_id, matrix_password=bot.password)
    check = await _matrix(by_password)
    assert check.ok and bot.user_id in check.detail
    by_token = make_settings(matrix_homeserver=synapse.url, matrix_user_id=bot.user_id, matrix_access_token=bot.access_token)
    assert (await _matrix(by_token)).ok
    out = io.StringIO()
    await run_checks(by_token, Console(file=out, width=300))
    assert f"matrix: logged in to {synapse.url} as {bot.user_id}" in out.getvalue()


async def test_doctor_says_what_is_wrong(make_settings, synapse, matrix_user):
    bot = matrix_user("bot")
    wrong = make_settings(matrix_homeserver=synapse.url, matrix_user_id=bot.user_id, matrix_password=SecretStr("nope"))
    check = await _matrix(wrong)
    assert not check.ok and "refused the login" in check.detail and "BICAMERAL_MATRIX_PASSWORD" in check.detail
    assert "nope" not in check.detail
    revoked = make_settings(matrix_homeserver=synapse.url, matrix_user_id=bot.user_id, matrix_access_token="syt_gone")
    assert "M_UNKNOWN_TOKEN" in (await _matrix(revoked)).detail
    nowhere = make_settings(matrix_homeserver="http://127.0.0.1:9", matrix_user_id=bot.user_id, matrix_access_token="x")
    assert "cannot reach http://127.0.0.1:9" in (await _matrix(nowhere)).detail
    not_a_homeserver = make_settings(matrix_homeserver=f"{synapse.url}/nothing", matrix_user_id=bot.user_id,
                                     matrix_access_token="x")
    assert "is it a homeserver?" in (await _matrix(not_a_homeserver)).detail
    off = await _matrix(make_settings())
    assert off.ok and not off.required and "not configured" in off.detail
