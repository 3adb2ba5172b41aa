"""Settings: one object, provider:model references, defaults that pick the configured provider."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bicameral.config import Settings


def test_for_test_ignores_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BICAMERAL_MODE", "garbage")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-be-read")
    settings = Settings.for_test(tmp_path)
    assert settings.mode == "bicameral"  # the default, not the env's garbage
    assert settings.anthropic_api_key is None
    assert settings.data_dir == tmp_path / "data"


def test_env_is_read_with_the_prefix_and_sdk_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DEBOUNCE_MS", "2500")
    monkeypatch.setenv("BICAMERAL_BACK_MODEL", "anthropic:claude-sonnet-4-5")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    settings = Settings()
    assert settings.debounce_ms == 2500
    assert settings.back.provider == "anthropic" and settings.back.model == "claude-sonnet-4-5"
    assert settings.openai_base_url == "http://127.0.0.1:1/v1"


def test_toml_file_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bicameral.toml").write_text('bot_name = "Jeeves"\ndebounce_ms = 10\n')
    settings = Settings()
    assert settings.bot_name == "Jeeves" and settings.debounce_ms == 10


def test_no_key_means_the_local_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "BICAMERAL_BACK_MODEL", "BICAMERAL_FRONT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().back_model == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert Settings().back.provider == "anthropic"


@pytest.mark.parametrize("ref", ["gpt-4", "anthropic", "anthropic:", "nope:model"])
def test_bad_model_references_are_explained(tmp_path, ref):
    with pytest.raises(ValidationError, match=r"provider|model"):
        Settings.for_test(tmp_path, back_model=ref)


def test_secrets_are_hidden_in_repr(tmp_path):
    settings = Settings.for_test(tmp_path, telegram_token="123:SECRET", openai_api_key="sk-secret")
    assert "SECRET" not in repr(settings) and "sk-secret" not in repr(settings)
    assert set(settings.secret_values()) == {"123:SECRET", "sk-secret"}


def test_no_database_url_keeps_sqlite_in_the_data_dir(tmp_path):
    settings = Settings.for_test(tmp_path)
    assert settings.database_url is None
    assert settings.database_location == tmp_path / "data" / "bicameral.db" == settings.db_path
    assert Settings.for_test(tmp_path, database_url="  ").database_location == settings.db_path  # blank is unset


@pytest.mark.parametrize("url", ["postgresql://bot:s3cret@db.example.org:5432/bicameral", "postgres://bot:s3cret@127.0.0.1/b"])
def test_a_postgresql_url_selects_postgresql(tmp_path, url):
    settings = Settings.for_test(tmp_path, database_url=url)
    assert settings.database_location == url
    assert "s3cret" not in repr(settings)


def test_the_database_url_is_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DATABASE_URL", "postgresql://bot:s3cret@127.0.0.1:5433/bicameral")
    assert Settings().database_location == "postgresql://bot:s3cret@127.0.0.1:5433/bicameral"


@pytest.mark.parametrize("url", [
    "mysql://bot:s3cret@db.example.org/bicameral",
    "sqlite:///tmp/s3cret.db",
    "bot:s3cret@db.example.org/bicameral",
    "https://bot:s3cret@db.example.org/",
    "s3cret",
])
def test_another_scheme_is_an_error_naming_the_setting_without_the_password(tmp_path, monkeypatch, url):
    with pytest.raises(ValidationError) as caught:
        Settings.for_test(tmp_path, database_url=url)
    (error,) = caught.value.errors()
    assert "BICAMERAL_DATABASE_URL" in error["msg"]
    assert "s3cret" not in error["msg"] and "s3cret" not in str(caught.value)
    # The same through the environment, as `bicameral run` reads it.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BICAMERAL_DATABASE_URL", url)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert "BICAMERAL_DATABASE_URL" in str(caught.value) and "s3cret" not in str(caught.value)


def test_the_database_url_and_its_password_are_secrets_for_the_logs(tmp_path):
    url = "postgresql://bot:p%40ss%2Fw0rd@db.example.org/bicameral"
    settings = Settings.for_test(tmp_path, database_url=url, telegram_token="123:SECRET")
    assert set(settings.secret_values()) == {"123:SECRET", url, "p%40ss%2Fw0rd", "p@ss/w0rd"}
    no_password = Settings.for_test(tmp_path, database_url="postgresql:///bicameral")  # a local socket, peer login
    assert no_password.secret_values() == ["postgresql:///bicameral"]


def test_the_scheme_alone_is_quoted_back(tmp_path):
    with pytest.raises(ValidationError) as caught:
        Settings.for_test(tmp_path, database_url="mysql://bot:s3cret@db/bicameral")
    assert "not mysql://…" in caught.value.errors()[0]["msg"]
