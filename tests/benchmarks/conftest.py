"""The pytest-benchmark suite's target and drafts: the shipped ones, or the user's pair.

    SPECDEC_TARGET=hf:FOLDER SPECDEC_DRAFT=hf:FOLDER pytest tests/benchmarks --benchmark-autosave \
        --benchmark-storage .benchmarks/my-pair

SPECDEC_TARGET (hf:FOLDER, hf:MODEL-ID already cached, or a checkpoint path) replaces the shipped target for these
benchmarks only, and SPECDEC_DRAFT (hf:FOLDER, prompt-lookup, a registered name) is the draft "user". The
drafts the target cannot have and every backend but eager are left out. Each saved run's machine_info names the
target and draft, so `--benchmark-compare` against a run of another pair says that they differ; keep each pair's
runs in a storage of its own (`--benchmark-storage`).

`python tools/count_benchmarks.py` runs this suite counted (one process under the work counter, its plugin
adding each benchmarked call's instructions to its extra_info); it refuses a THREADS other than 1.
"""

import functools
import os

import pytest
import torch

import specdec
from specdec.measure import hygiene

THREADS = 1  # torch's and numpy's BLAS threads in every timing of this suite (recorded in machine_info)
USER_TARGET = os.environ.get("SPECDEC_TARGET") or None
USER_DRAFT = os.environ.get("SPECDEC_DRAFT") or None


def drafts_for_suite() -> list[str]:
    """The draft names the suite parametrises over: every shipped draft, or for the user's target the table
    drafts and prompt lookup (which any target can have) and "user" when SPECDEC_DRAFT is set."""
    if USER_TARGET is None:
        return list(specdec.DRAFTS)
    return ["bigram", "ngram", "prompt-lookup"] + (["user"] if USER_DRAFT else [])


def backends_for_suite() -> list[str]:
    return list(specdec.BACKENDS) if USER_TARGET is None else ["eager"]


@pytest.fixture(scope="session", autouse=True)
def fixed_threads():
    """Every benchmark here times with THREADS torch threads and THREADS BLAS threads: torch's count does not
    reach numpy's BLAS (the numpy backend's matmuls), which would otherwise start one thread per core."""
    return hygiene.set_threads(THREADS)


if USER_TARGET is not None:

    @pytest.fixture(scope="session")
    def target():
        torch.set_num_threads(1)
        return specdec.load_target(USER_TARGET)

    @pytest.fixture(scope="session")
    def draft_factory(target):
        @functools.lru_cache(maxsize=None)
        def make(name):
            return specdec.make_draft(USER_DRAFT if name == "user" else name, target)

        return make


def pytest_benchmark_update_machine_info(config, machine_info):
    """Which pair the run measured, beside pytest-benchmark's own machine facts."""
    machine_info["specdec_target"] = USER_TARGET or "shipped"
    machine_info["specdec_draft"] = USER_DRAFT
    machine_info["specdec_threads"] = {"torch": torch.get_num_threads(), "blas": hygiene.blas_threads()}
