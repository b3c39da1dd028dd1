"""Git sources under a test's own directory: local roots, cache and loopback allowed."""

import pytest

from tests.gitsource.repos import GitHost, Repo


@pytest.fixture
def git_settings(settings, tmp_path):
    settings.GIT_SOURCE_LOCAL_ROOTS = [str(tmp_path)]
    settings.GIT_CACHE_DIR = str(tmp_path / "cache")
    settings.GIT_SOURCE_ALLOWED_HOSTS = ["127.0.0.1:*"]
    settings.GIT_FETCH_TIMEOUT_SECONDS = 30
    return settings


@pytest.fixture
def repo(tmp_path, git_settings) -> Repo:
    return Repo(tmp_path / "origin")


@pytest.fixture
def git_host(repo):
    host = GitHost(repo.bare.parent)
    yield host
    host.stop()
