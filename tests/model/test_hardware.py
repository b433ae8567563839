"""Honest hardware paths: a backend that computes on the CPU is refused with a CUDA device (it would run eager
under its own name), and every timing sets numpy's BLAS threads beside torch's."""

import pytest

from specdec import cli
from specdec.model import backends
from specdec.util.errors import InputError


@pytest.mark.parametrize("argv", [["generate", "--backend", "numpy"], ["verify", "--backend", "onnx"],
                                  ["report", "--backend", "fused"], ["report", "--backend", "all"]])
def test_a_cpu_backend_with_cuda_is_one_line_naming_the_allowed_ones(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv + ["--device", "cuda"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err == (f"specdec {argv[0]}: error: --backend {argv[2]} runs on the CPU only "
                                            "(allowed with --device cuda: auto, eager)\n")


def test_the_library_refuses_a_cpu_backend_on_cuda_before_measuring():
    assert backends.check_device("numpy", "cpu") == "numpy" and backends.check_device("eager", "cuda:0") == "eager"
    for name in ("numpy", "onnx", "fused"):
        with pytest.raises(InputError, match=f"backend '{name}' runs on the CPU only, not on cuda "
                                             r"\(allowed on cuda: eager\)"):
            backends.check_device(name, "cuda")


def test_report_measure_refuses_a_numpy_target_on_cuda(target):
    from specdec.report import build

    with pytest.raises(InputError, match="backend 'numpy' runs on the CPU only"):
        build.measure(backends.to_backend(target, "numpy"), ["bigram"], [1], device="cuda")


def test_the_asv_suite_sets_blas_threads_with_torchs(monkeypatch):
    from threadpoolctl import threadpool_limits

    from benchmarks import common

    monkeypatch.setattr(common, "THREADS", 1)
    with threadpool_limits(limits=2, user_api="blas"):  # restored on leaving: the limit is process-wide
        assert common.fix_threads() == 1
        assert common.blas_threads() in (1, None)  # None: no BLAS loaded, nothing to limit


def test_the_pytest_benchmark_suite_records_its_threads():
    from tests.benchmarks import conftest

    info = {}
    conftest.pytest_benchmark_update_machine_info(None, info)
    assert set(info["specdec_threads"]) == {"torch", "blas"}
