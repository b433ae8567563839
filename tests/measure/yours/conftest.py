"""The sample user repository (tests/user_repo.py) as fixtures shared by test_user_repo.py and the counted bisect
beside it (test_user_repo_bisect_work.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import user_repo


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("user") / "repo"
    return root, user_repo.make(root)


@pytest.fixture
def rounds(sample) -> tuple[Path, list[str]]:
    """The sample's commits 1..4, then a note, a rollback made dearer (every round pays it), and a readme."""
    return user_repo.history(sample, "rounds", [3, ("add", "NOTES.md", "a round\n"),
                                                ("add", "mydraft.py", user_repo.draft_source(rollback=True)),
                                                ("add", "README.md", "rounds\n")])
