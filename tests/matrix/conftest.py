"""The Matrix tests' homeserver: one real Synapse per test session, and fresh users on it for each test."""

from __future__ import annotations

import itertools

import pytest

from tests.support.synapse import Synapse

_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory):
    server = Synapse(tmp_path_factory.mktemp("synapse")).start()
    yield server
    server.stop()


@pytest.fixture
def matrix_user(synapse):
    """Register a new user (a unique localpart per call, so tests never share rooms or history)."""

    def make(name: str, displayname: str | None = None):
        return synapse.register(f"{name}{next(_numbers)}", displayname=displayname)

    return make
