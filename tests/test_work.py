"""The work counter (specdec/measure/work.py): the hardware path's protocol with a fake libc (these VMs have no
PMU), the counting loop with a scripted counter, and callgrind for real where valgrind is installed."""

import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest

from specdec.measure import ab_work, work


def test_perf_attr_asks_for_user_space_instructions_of_this_thread():
    attr = work.perf_attr()
    assert len(attr) == work.PERF_ATTR_SIZE == 128
    kind, size, config = struct.unpack_from("=IIQ", attr, 0)
    assert (kind, size, config) == (0, 128, 1)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS
    (flags,) = struct.unpack_from("=Q", attr, 40)
    assert flags == 0b1100001  # disabled, exclude_kernel, exclude_hv; not inherited, user space counted
    assert attr[48:] == bytes(80)


class FakeLibc:
    """syscall hands out a pipe's read end as the event's fd; ioctls are recorded."""

    def __init__(self, fail: bool = False):
        self.fail, self.ioctls = fail, []
        self.r, self.w = os.pipe()

    def syscall(self, number, attr, pid, cpu, group, flags):
        self.args = (number, pid, cpu, group, flags)
        return -1 if self.fail else self.r

    def ioctl(self, fd, request, arg):
        self.ioctls.append(request)
        return 0


def test_the_hardware_counter_resets_enables_and_reads_its_fd():
    libc = FakeLibc()
    c = work.PerfCounter(libc, machine="x86_64")
    assert libc.args == (298, 0, -1, -1, 8)  # perf_event_open(attr, this thread, any CPU, no group, CLOEXEC)
    c.start()
    os.write(libc.w, struct.pack("=Q", 123456789))
    assert c.stop() == 123456789
    assert libc.ioctls == [0x2403, 0x2400, 0x2401]  # RESET, ENABLE, then DISABLE


def test_no_pmu_is_unavailable_with_the_reason_not_a_crash():
    with pytest.raises(work.WorkUnavailable, match="perf_event_open.*no PMU"):
        work.PerfCounter(FakeLibc(fail=True), machine="x86_64")
    with pytest.raises(work.WorkUnavailable, match="no syscall number"):
        work.PerfCounter(FakeLibc(), machine="vax")


def test_without_valgrind_nothing_counts_and_the_remedy_is_named(monkeypatch):
    monkeypatch.setattr(work.shutil, "which", lambda name: None)
    monkeypatch.setattr(work, "PerfCounter", lambda *a: (_ for _ in ()).throw(work.WorkUnavailable("no PMU here")))
    avail = work.probe()
    assert avail.kind is None and avail.name == "unavailable"
    assert "no PMU here" in avail.reason and "apt-get install valgrind" in avail.reason
    assert ab_work.plan({"engine": "openai"}) == (None, "the openai engine generates in a server, not in the "
                                                        "worker's process")


@pytest.mark.parametrize("counts, figure, spread", [([5, 3, 4, 3], 3, 0.0), ([12, 10, 11], 10, 0.1), ([7], 7, 0.0)])
def test_the_figure_is_the_fewest_and_its_spread_the_next_fewest(counts, figure, spread):
    assert work.summarise(counts) == (figure, pytest.approx(spread))


class Scripted:
    kind = "scripted"

    def __init__(self, counts):
        self.counts, self.log = list(counts), []

    def begin(self):
        self.log.append("begin")

    def start(self):
        self.log.append("start")

    def stop(self):
        self.log.append("stop")
        return ("token", self.counts.pop(0))

    def read(self, token):
        self.log.append("read")
        return token[1]

    def end(self):
        self.log.append("end")


def test_count_calls_warms_up_then_counts_with_the_collector_off():
    seen = []

    def call():
        seen.append(("call", gc.isenabled()))

    call.prepare = lambda: seen.append(("prepare", None))
    call.again = lambda: seen.append(("again", None))
    counter = Scripted([110, 100, 104])
    got = work.count_calls(call, counter, warmup=2, calls=3)
    assert (got.per_call, got.counts, got.warmup) == (100, [110, 100, 104], 2)
    assert got.spread == pytest.approx(0.04)
    assert counter.log == ["begin"] + ["start", "stop"] * 3 + ["end"] + ["read"] * 3  # the dumps read after the run
    assert seen[0] == ("prepare", None)  # the full prepare once, then the cheap one before every call
    assert seen[1:] == [("again", None), ("call", True)] * 2 + [("again", None), ("call", False)] * 3
    assert gc.isenabled()


def test_a_callgrind_dump_is_read_from_its_totals_line(tmp_path):
    (tmp_path / "cg.77.10").write_text("version: 1\ndesc: Trigger: Client Request: x\nsummary: 0\ntotals: 42\n")
    assert work.dump_count(str(tmp_path / "cg.77.10")) == 42
    (tmp_path / "bad").write_text("events: Ir\n")
    with pytest.raises(RuntimeError, match="no 'totals:' line"):
        work.dump_count(str(tmp_path / "bad"))
    with pytest.raises(RuntimeError, match="running under callgrind"):
        work.dump_count(str(tmp_path / "cg.77.11"))


def test_the_counted_process_gets_a_fixed_small_environment():
    env = work.counted_env("callgrind", "/tmp/x.%p", {"PYTHONPATH": "/src"},
                           base={"PATH": "/bin", "HOME": "/root", "SHELL": "/bin/bash", "SPECDEC_BENCH_THREADS": "1",
                                 "OPENBLAS_CORETYPE": "Haswell", "PYTHONHASHSEED": "random", "TERM": "xterm"})
    assert env == {"PATH": "/bin", "HOME": "/root", "SPECDEC_BENCH_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell",
                   "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                   "SPECDEC_WORK_COUNTER": "callgrind", "SPECDEC_CALLGRIND_OUT": "/tmp/x.%p", "PYTHONPATH": "/src"}
    argv = work.command(["python", "w.py"], "callgrind", "/tmp/x.%p")
    assert argv[:3] == ["valgrind", "--tool=callgrind", "--instr-atstart=no"] and argv[-2:] == ["python", "w.py"]
    assert work.command(["python"], "perf") == ["python"]
    with pytest.raises(ValueError, match="%p"):
        work.command(["python"], "callgrind", "/tmp/x.out")


def test_ab_work_verdicts_against_the_floor_and_the_spread():
    def side(n, spread=0.0):
        return {"per_call": n, "counts": [n], "warmup": 8, "spread": spread}

    counted = {"rows": {"same": {"a": side(100000), "b": side(100100)},  # +0.1 %: inside the 0.5 % floor
                        "worse": {"a": side(100000), "b": side(100600)},  # +0.6 %
                        "better": {"a": side(100000), "b": side(99000)},
                        "spread": {"a": side(100000, 0.004), "b": side(100600)}}}  # 2 x 0.4 % = 0.8 % > 0.6 %
    got = ab_work.judge(counted)
    assert {n: r["verdict"] for n, r in got.items()} == {"same": "same", "worse": "worse", "better": "better",
                                                          "spread": "same"}
    assert got["worse"]["change"] == pytest.approx(0.006) and got["spread"]["threshold"] == pytest.approx(0.008)
    time_rows = {"same": {"verdict": "worse", "detectable": 0.02}, "worse": {"verdict": "same", "detectable": 0.03},
                 "better": {"verdict": "better", "detectable": 0.02}}
    told = {d["row"]: d["why"] for d in ab_work.disagreements(got, time_rows)}
    assert set(told) == {"same", "worse"}
    assert "cache, memory-layout or dispatch effect" in told["same"]
    assert told["worse"] == "work worse while time stayed within its interval (time detects 3.0% here)"


PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("specdec_work_method", {path!r})
work = importlib.util.module_from_spec(spec); sys.modules[spec.name] = work; spec.loader.exec_module(work)

def loop(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

c = work.open_counter()
one = work.count_calls(lambda: loop(20000), c, warmup=4, calls=3)
two = work.count_calls(lambda: loop(40000), c, warmup=4, calls=3)
print(json.dumps([one.as_dict(), two.as_dict()]))
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)")
def test_callgrind_counts_a_python_loop_in_proportion(tmp_path):
    pytest.importorskip("pytest_codspeed")
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(PROBE.format(path=work.__file__)))
    proc = work.popen([sys.executable, str(script)], "callgrind", str(tmp_path / "cg.%p"), cwd=str(tmp_path),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    one, two = json.loads(out)
    for c in (one, two):  # warm calls: within a few percent of each other (the allocator's state moves them)
        assert len(c["counts"]) == 3 and max(c["counts"]) / min(c["counts"]) < 1.05
    assert 1.9 < two["per_call"] / one["per_call"] < 2.1  # twice the loop, twice the work
