"""The work counter (specdec/measure/work/work.py): the hardware path's protocol with a fake libc (these VMs have no
PMU), the counting loop with a scripted counter, and callgrind for real where valgrind is installed."""

import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scipy import stats

from specdec.measure.ab import ab_work
from specdec.measure.work import work


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
    # the hardware counter's single figure is all work: nothing split apart (alloc None)
    assert (got.fewest, [c["work"] for c in got.counts], got.warmup, got.alloc) == (100, [110, 100, 104], 2, None)
    assert got.spread == pytest.approx(0.04)
    assert counter.log == ["begin"] + ["start", "stop"] * 3 + ["end"] + ["read"] * 3  # the dumps read after the run
    assert seen[0] == ("prepare", None)  # the full prepare once, then the cheap one before every call
    assert seen[1:] == [("again", None), ("call", True)] * 2 + [("again", None), ("call", False)] * 3
    assert gc.isenabled()


DUMP = """version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
desc: Trigger: Client Request: specdec-77-a-1
ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(1) ???
fn=(1) _int_malloc
0 300
fn=(2) malloc
0 50
cfn=(1)
calls=2 0
0 300
ob=(2) /usr/lib/libpython3.11.so.1.0
fl=(2) ???
fn=(3) _PyObject_Malloc
0 40
fn=(4) find_name_in_mro
0 70
cfn=(5) _Py_dict_lookup
calls=3 0
0 90
fn=(5)
0 90
fn=(6) _PyType_Lookup
0 20
cfn=(4)
calls=1 0
0 160
fn=(7) _PyEval_EvalFrameDefault
0 1000
cfn=(2)
calls=2 0
0 350
ob=(3) /opt/venv/lib/libfoo.so
fn=(8) malloc
0 5
totals: 1575
"""


def test_a_callgrind_dump_is_split_into_the_allocators_the_type_caches_misses_and_the_rest(tmp_path):
    """Exclusive costs add up to the totals line (a cost after `calls=` is the callee's inclusive one): glibc's
    _int_malloc 300 + malloc 50 and pymalloc's 40 are the allocators' (390); find_name_in_mro's inclusive
    160 at its one call is the type cache's misses; the rest, 1575 - 390 - 160 = 1025, is the work (a `malloc`
    outside libc is not glibc's)."""
    path = tmp_path / "cg.77.1"
    path.write_text(DUMP)
    assert work.split_dump(str(path)) == {"total": 1575, "alloc": 390, "lookup": 160, "work": 1025}
    path.write_text(DUMP.replace("totals: 1575", "totals: 1576"))
    with pytest.raises(RuntimeError, match="add up to 1575, its totals line says 1576"):
        work.split_dump(str(path))
    (tmp_path / "bad").write_text("events: Ir\n")
    with pytest.raises(RuntimeError, match="no 'totals:' line"):
        work.split_dump(str(tmp_path / "bad"))
    with pytest.raises(RuntimeError, match="running under callgrind"):
        work.split_dump(str(tmp_path / "cg.77.11"))


def test_a_dump_is_found_by_its_regions_name_whatever_number_callgrind_gave_it(tmp_path):
    (tmp_path / "cg.77.1").write_text(DUMP)
    (tmp_path / "cg.77.2").write_text(DUMP.replace("specdec-77-a-1", "specdec-77-b-1"))
    assert work.find_dump(str(tmp_path / "cg.77"), "specdec-77-b-1") == str(tmp_path / "cg.77.2")
    with pytest.raises(RuntimeError, match="0 callgrind dumps"):
        work.find_dump(str(tmp_path / "cg.77"), "specdec-77-c-1")


@pytest.mark.parametrize("name, obj, mine", [("_int_free.isra.0", "/lib/libc.so.6", True),
                                             ("unlink_chunk.constprop.0", "/lib/x86_64/libc.so.6", True),
                                             ("malloc", "/opt/libtorch_cpu.so", False),
                                             ("_PyObject_Free", "/usr/bin/python3.11", True),
                                             ("_PyEval_EvalFrameDefault", "/usr/bin/python3.11", False),
                                             ("memcpy", "/lib/libc.so.6", False)])
def test_the_allocators_functions_are_one_list(name, obj, mine):
    assert work.allocator_function(obj, name) is mine


def test_a_layout_is_drawn_from_its_seed():
    assert work.perturb(0) == []
    one, again, other = work.perturb(5), work.perturb(5), work.perturb(6)
    shape = [type(x).__name__ if not isinstance(x, str) else len(x) for x in one]
    assert shape == [type(x).__name__ if not isinstance(x, str) else len(x) for x in again]
    assert shape != [type(x).__name__ if not isinstance(x, str) else len(x) for x in other]


def test_the_counted_process_gets_a_fixed_small_environment():
    env = work.counted_env("callgrind", "/tmp/x.%p", {"PYTHONPATH": "/src"},
                           base={"PATH": "/bin", "HOME": "/root", "SHELL": "/bin/bash", "SPECDEC_BENCH_THREADS": "1",
                                 "OPENBLAS_CORETYPE": "Haswell", "PYTHONHASHSEED": "random", "TERM": "xterm",
                                 "ORT_DISABLE_TELEMETRY": "0"})
    # ONNX Runtime's telemetry always off: its timer's work landed inside counted calls (+2.0 % with the machine
    # loaded); the user's own setting is not kept
    assert env == {"PATH": "/bin", "HOME": "/root", "SPECDEC_BENCH_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell",
                   "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "ORT_DISABLE_TELEMETRY": "1",
                   "SPECDEC_WORK_COUNTER": "callgrind", "SPECDEC_CALLGRIND_OUT": "/tmp/x.%p", "PYTHONPATH": "/src"}
    argv = work.command(["python", "w.py"], "callgrind", "/tmp/x.%p")
    assert argv[:3] == ["valgrind", "--tool=callgrind", "--instr-atstart=no"] and argv[-2:] == ["python", "w.py"]
    assert work.command(["python"], "perf") == ["python"]
    with pytest.raises(ValueError, match="%p"):
        work.command(["python"], "callgrind", "/tmp/x.out")


def test_ab_work_verdicts_compare_the_layouts_means_against_the_calibration_or_their_spread():
    """Three layouts a side, 4 rows judged at 1 %. Uncalibrated: layouts 500 apart on 100,000: each side's variance
    250,000, the means' sd sqrt(2 x 250,000 / 3) / 100,000 = 4.0825e-3, times t at 0.01 / 4 two-sided on 4
    degrees of freedom (6.7583) = 2.76 %, wider than the +1 % change: same. Layouts that agree exactly and no
    calibration: nothing says how far a count moves, the sd is 0 and any change is flagged (said "uncalibrated").
    Calibrated (sigma_l 0.01 %, no build part, 32 df; the largest change between its trees 0.03 %): sd 1e-4 x
    sqrt(2/3) = 8.165e-5, t at 0.01 / 4 on 32 df (3.2812): 0.0268 %, below MARGIN (3) x the calibration's 0.03 %,
    so 0.09 %."""
    def side(*ns):
        return [{"fewest": n, "alloc": 10, "counts": [], "warmup": 24, "spread": 0.0} for n in ns]

    cal = {"sigma_l": 1e-4, "df_l": 32, "ms_between": 1e-8, "df_b": 16, "layouts": 3, "largest": 0.0003}
    counted = {"rows": {"same": {"a": side(100000, 100000, 100000), "b": side(100020, 100020, 100020)},
                        "worse": {"a": side(100000, 100010, 99990), "b": side(100200, 100210, 100190)},
                        "better": {"a": side(100000, 100000, 100000), "b": side(99000, 99000, 99000)},
                        "spread": {"a": side(100000, 100500, 99500), "b": side(101000, 101500, 100500)}},
               "calibration": {"rows": {"same": cal, "worse": cal, "better": cal}}}
    got = ab_work.judge(counted)
    assert {n: r["verdict"] for n, r in got.items()} == {"same": "same", "worse": "worse", "better": "better",
                                                          "spread": "same"}
    assert got["worse"]["change"] == pytest.approx(0.002) and got["worse"]["threshold"] == pytest.approx(0.0009)
    assert stats.t.isf(0.01 / 4 / 2, 32) * 1e-4 * (2 / 3) ** 0.5 == pytest.approx(0.000268, rel=1e-2)
    assert got["spread"]["sd"] == pytest.approx((2 * 250000 / 3) ** 0.5 / 100000)
    assert got["spread"]["threshold"] == pytest.approx(0.0040825 * stats.t.isf(0.01 / 4 / 2, 4), rel=1e-4)
    assert round(stats.t.isf(0.01 / 4 / 2, 4), 4) == 6.7583
    assert [got[n]["calibrated"] for n in ("same", "spread")] == [True, False]
    bare = ab_work.judge({"rows": {"x": {"a": side(100000, 100000, 100000), "b": side(100001, 100001, 100001)}}})
    assert bare["x"]["verdict"] == "worse" and bare["x"]["threshold"] == 0.0
    assert got["same"]["alloc"]["change"] == 0.0 and got["same"]["layouts"] == 3
    time_rows = {"same": {"verdict": "worse", "detectable": 0.02}, "worse": {"verdict": "same", "detectable": 0.03},
                 "better": {"verdict": "better", "detectable": 0.02}}
    told = {d["row"]: d["why"] for d in ab_work.disagreements(got, time_rows)}
    assert set(told) == {"same", "worse"}
    assert "cache, memory-layout or dispatch effect" in told["same"]
    assert told["worse"] == "work worse while time stayed within its interval (time detects 3.0% here)"


PROBE = """
import json, runpy
work = runpy.run_path({method!r})["load"]("work/work.py")  # by path, as the worker loads it

def loop(n):
    s = 0
    for i in range(n):
        s += i % 7  # small ints all the way: every iteration the same work
    return s

c = work.open_counter()
one = work.count_calls(lambda: loop(20000), c, warmup=4, calls=3)
other = work.open_counter()  # a second counter in the same process: callgrind numbers its dumps per process
two = work.count_calls(lambda: loop(40000), other, warmup=4, calls=3)
print(json.dumps([one.as_dict(), two.as_dict()]))
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)")
def test_callgrind_counts_a_python_loop_in_proportion(tmp_path):
    pytest.importorskip("pytest_codspeed")
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(PROBE.format(method=str(Path(work.__file__).parents[1] / "method.py"))))
    proc = work.popen([sys.executable, str(script)], "callgrind", str(tmp_path / "cg.%p"), cwd=str(tmp_path),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    one, two = json.loads(out)
    for c in (one, two):  # warm calls, the allocators apart: within 0.01 % of each other
        works = [x["work"] for x in c["counts"]]  # (seen here: 674 instructions apart in 18.8 million)
        assert len(works) == 3 and min(works) == c["fewest"] and max(works) / min(works) - 1 < 0.0001
        assert c["alloc"] > 0
    # twice the loop, twice the work to a tenth of a percent (seen here: 2.0003); a later counter that read the
    # first one's dumps would give exactly 1
    assert abs(two["fewest"] / one["fewest"] - 2) < 0.002


def test_a_calibration_is_counted_fitted_kept_and_found_by_its_key(tmp_path, monkeypatch):
    """ab_work.calibrate lays out base, the A/A links, deep and the null trees, counts them as ab counts a
    revision (a stand-in counter here: every tree's layouts 1000, 1001, 1002 instructions, the null trees one
    more), fits them and keeps the result under the cache, where `ab_work.calibration` finds it for the same
    configuration and counter and not for another."""
    from specdec.measure.work import work_calibration

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    seen = {}

    def fake(sources, config, kind, rows, progress, by_tree=False):
        seen["trees"] = [s.name for s in sources]
        seen["rows"] = rows
        return {r: [[{"fewest": 1000 + i + s.name.startswith("null-")} for i in range(3)] for s in sources]
                for r in rows}

    monkeypatch.setattr(ab_work, "count_sources", fake)
    config = {"target": None, "backend": "onnx", "dtype": None, "drafts": ["bigram"], "ks": [2, 4], "chars": 80,
              "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}
    doc = ab_work.calibrate(config, "callgrind", aa=2, nulls=2)
    assert seen["trees"] == ["base", "aa-1", "aa-2", "deep", "null-1", "null-2"]
    assert seen["rows"] == ["target-only", "pass 1", "verify 5", "draft bigram", "spec bigram k=4", "round bigram k=4"]
    fit = doc["rows"]["pass 1"]
    assert (fit["trees"], fit["layouts"], fit["df_l"], fit["df_b"]) == (6, 3, 12, 5)
    assert fit["sigma_l"] == pytest.approx(1 / 1001, rel=2e-3)  # layouts 1 apart: variance 1, relative to ~1001
    assert fit["largest"] == pytest.approx(1 / 1001, rel=2e-3)  # a null tree's mean against the others'
    assert ab_work.calibration(config, "callgrind")["id"] == doc["id"] == work_calibration.key_id(
        work_calibration.key(config, "callgrind"))
    assert ab_work.calibration({**config, "temperature": 0.0}, "callgrind") is None
    assert ab_work.calibration(config, "perf") is None
