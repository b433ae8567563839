"""The overhead figures as text: `specdec overhead`'s plain text (`render`) and the report's Markdown tables
(`overhead_tables`): the machine's figures, the roofline table and the attribution table."""

from __future__ import annotations

from specdec.measure.anatomy.attribution import SCOPES
from specdec.measure.anatomy.profiler_split import CATEGORIES
from specdec.measure.anatomy.roofline import GEMM_SIZE, Machine, known
from specdec.report.markdown import table


def render(machine: Machine, rows: list[dict], attr: dict, context_pos: int = 100) -> str:
    """The machine's figures, the floor table and the attribution table as plain text."""
    lines = [f"machine ({machine.threads} thread{'s' if machine.threads > 1 else ''}): GEMM {GEMM_SIZE}x{GEMM_SIZE} "
             f"{machine.matmul_gflops:.1f} GFLOP/s, cache read {machine.cache_gbps:.1f} GB/s, memory read "
             f"{machine.memory_gbps:.1f} GB/s", "",
             f"{rows[0]['backend']} target pass after {context_pos} cached positions: median measured time against "
             f"the roofline "
             f"floor", f"{'positions':>9} {'measured µs':>12} {'floor µs':>9} {'overhead':>9} "
             f"{'MFLOP':>7} {'KB':>7}"]
    for r in rows:
        lines.append(f"{r['positions']:>9} {r['measured_us']:>12.1f} {known(r['floor_us'], '.1f'):>9} "
                     f"{known(r['share'], '.1%'):>9} {known(r['flops'], '.2f', 1e6):>7} {known(r['bytes'], '.0f', 1e3):>7}")
    lines += ["", "where the time goes (µs; labelled spans timed, the rest split by torch.profiler's self CPU "
              "time; the residual is what it cannot see)",
              f"{'category':32}" + "".join(f" {h:>11}" for h in scope_header(attr))]

    def row(what: str, values: dict[str, float], spec: str = ".1f") -> str:
        return (f"{what:32}" + "".join(f" {c:>11}" for c in scope_cells(values, spec))).rstrip()

    for name in CATEGORIES:
        lines.append(row(name, {scope: a["categories"][name] for scope, a in attr.items()}))
    for key, what in (("accounted_us", "accounted (sum of the above)"), ("measured_us", "measured untimed"),
                      ("accounted_ratio", "accounted / untimed (pairs)"), ("profiled_us", "profiled wall time"),
                      ("stretch", "profiler's stretch of the rest")):
        ratio = key in ("stretch", "accounted_ratio")
        lines.append(row(what, {scope: a[key] for scope, a in attr.items()}, ".3f" if ratio else ".1f"))
    return "\n".join(lines)


def scope_header(scopes) -> list[str]:
    """The attribution table's columns after the category: the scopes there are, in SCOPES order (a report
    saved by an older version may hold others; they are not shown)."""
    return [s for s in SCOPES if s in scopes]


def scope_cells(values: dict[str, float], spec: str = ".1f") -> list[str]:
    """One row of the attribution table under `scope_header(values)`: each scope's value formatted by `spec`."""
    return [format(values[s], spec) for s in SCOPES if s in values]


def overhead_tables(doc: dict) -> list[str]:
    """The overhead section's two tables: the target pass against its floor, and the attribution per backend
    (none for a report saved before the section existed; one line when it was skipped)."""
    setup = doc.get("overhead_setup")
    if setup is None:
        return []
    if setup.get("skipped"):
        return [f"\n## Overhead\n\nNot measured: {setup['skipped']}."]
    rows, m = doc["overhead"], setup["machine"]
    out = [f"\n## Overhead: the {rows[0]['backend']} target pass against its roofline floor "
           f"({setup['context_pos']} cached positions)\n"]
    out.append(table(["positions", "measured µs", "floor µs", "overhead share (1 - floor / measured)", "MFLOP",
                       "KB read"], [
        [r["positions"], f"{r['measured_us']:.1f}", known(r["floor_us"], ".1f"), known(r["share"], ".1%"),
         known(r["flops"], ".2f", 1e6), known(r["bytes"], ".0f", 1e3)] for r in rows]))
    out.append(f"\nThe floor is max(FLOPs / GEMM throughput, bytes / cache bandwidth), both measured here "
               f"({m['threads']} thread(s)): GEMM {m['matmul_gflops']:.1f} GFLOP/s, cache reads "
               f"{m['cache_gbps']:.1f} GB/s (memory {m['memory_gbps']:.1f} GB/s). Measured: the median pass."
               + ("" if rows[0]["flops"] is not None else " The target's architecture has no counted FLOPs or bytes "
                  "(`roofline.pass_shape`): its work, floor and share are unknown, not guessed."))
    if not doc["attribution"]:
        out.append("\nWhere the time goes: not measured (the profiled blocks did not fit this model's budget; "
                   "`specdec overhead` gives them alone).")
    for backend, scopes in doc["attribution"].items():
        out.append(f"\n### Where the time goes, {backend} backend: a target-only step and a speculative round "
                   f"({setup['draft']}, k = {setup['k']}), µs\n")
        out.append(_attribution_table(scopes, setup["totals"][backend]))
    out.append("\nThe labelled spans -- logits to sample, the rule, the draft -- are timed directly (perf_counter, "
               "about a microsecond a span); the rest, the target's forward and the loop around it, is split by "
               "torch.profiler: the self CPU time of the ops, by category, and what no op accounts for (framework "
               "dispatch and Python, less the profiler's own cost per event recorded), in proportion, scaled onto "
               "the rest's timed µs (the profiler stretches it by the factor shown). An ONNX Runtime run (the onnx "
               "backend's pass with its softmax or sampling) is timed as a span and split the same way by ONNX "
               "Runtime's own profiler: its kernels by category, the rest of the run (executor, binding) as "
               "dispatch. So the categories sum to the accounted time, the timed blocks' wall time, held against "
               "the same work run bare as the median ratio of neighbouring blocks. torch.profiler sees no op "
               "inside numpy's forward: it lands in framework dispatch and Python.")
    return out


def _attribution_table(scopes: dict[str, dict[str, float]], totals: dict[str, dict]) -> str:
    """One backend's attribution: category -> µs per scope (`scope_header`), then the totals its report version
    recorded."""
    rows = [[name, *scope_cells({s: cats[name] for s, cats in scopes.items()})] for name in scopes["step"]]
    first = totals["step"]
    for key, what in ((("accounted_us", "accounted (sum of the above)"),
                       ("measured_us", "measured untimed"),
                       ("accounted_ratio", "accounted / untimed (median of neighbouring blocks)"),
                       ("stretch", "the profiler's stretch of the rest (x)"))
                      if "accounted_ratio" in first else
                      (("accounted_us", "accounted (sum of the above)"),
                       ("measured_us", "measured without the profiler"),
                       ("profiler_us", "the profiler's own cost (taken out)"))
                      if "accounted_us" in first else  # a report from before the cost was taken out
                      (("profiled_us", "profiled (sum of the above)"),
                       ("measured_us", "measured without the profiler"))):
        ratio = key in ("accounted_ratio", "stretch")
        rows.append([what, *scope_cells({s: t[key] for s, t in totals.items() if s in scopes},
                                        ".3f" if ratio else ".1f")])
    return table(["category", *scope_header(scopes)], rows)
