"""Shared fixtures: the shipped target and each draft are built once per test session."""

import functools

import pytest
import torch

import specdec


@pytest.fixture(scope="session")
def target():
    torch.set_num_threads(1)
    return specdec.load_target()


@pytest.fixture(scope="session")
def draft_factory(target):
    @functools.lru_cache(maxsize=None)
    def make(name):
        return specdec.make_draft(name, target)

    return make
