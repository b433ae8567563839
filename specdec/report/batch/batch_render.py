"""The batch section as Markdown: per draft and batch size the paired speedup with its interval, the prediction
made before the pairs, the cost model's terms at B (T_B(k+1)/T_B(1) predicted and measured, c_B), and each
draft's crossover. Reads only the document (`batch_section.measure`'s `load`)."""

from __future__ import annotations

from specdec.report.markdown import table


def batch_lines(doc: dict) -> list[str]:
    """The section's lines; none when the document has no batch section."""
    load = doc.get("batch")
    if not load:
        return []
    out = ["\n## Batch: speedup against batch size B\n"]
    if load.get("unavailable"):
        return out + [f"Unavailable for this target: {load['unavailable']}"]
    f = load["noise_floor"]
    out.append(f"B sequences generated at once ({load['chars']} each; the workload's runs cycled), target-only "
               f"and speculative alternated pair by pair; each draft at k = its best. Noise floor (A/A at B = "
               f"{f['batch']}): {f['measured']:.3f} [{f['ci_low']:.3f}, {f['ci_high']:.3f}], {f['pairs']} pairs. "
               f"Prediction before the pairs: chars per pass / (r_B + k·c_B); r_B = T_B(k+1)/T_B(1) predicted from "
               f"B = 1's passes (a + b·positions).{_kernels(load)}\n")
    rows = [[r["draft"], r["k"], r["batch"], f"{r['chars_per_pass']:.2f}", f"{r['predicted_before']:.2f}",
             f"{r['measured']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]", r["pairs"],
             f"{r['r_predicted']:.2f}", f"{r['r_measured']:.2f}", f"{r['c_measured']:.3f}"]
            for r in sorted(load["rows"], key=lambda r: (r["draft"], r["batch"]))]
    out.append(table(["draft", "k", "B", "chars/pass", "predicted", "measured [interval]", "pairs",
                      "r_B predicted", "r_B measured", "c_B"], rows))
    out.append("\nCrossover (the smallest B that does not pay after one that did; a B pays when its interval lies "
               "above 1 and above the noise floor's):\n")
    out += [f"- {name} k={load['ks'][name]}: {c['text']}" for name, c in load["crossover"].items()]
    if load.get("dropped_batches"):
        out.append(f"\nNot measured within the budget: B = {', '.join(map(str, load['dropped_batches']))}.")
    for name, why in (load.get("unavailable_drafts") or {}).items():
        out.append(f"\n{name}: {why}")
    return out


def _kernels(load: dict) -> str:
    """A sentence when B = 1 and B > 1 ran different kernels (every backend but eager): the curve then holds a
    change of kernel between B = 1 and 2 as well as the batch's own cost."""
    k = load.get("kernels") or {}
    if not k or k.get("single") == "eager":
        return ""
    return (f" B = 1 ran the {k['single']} backend's single-sequence kernels, B > 1 {k['batched']}: the step from "
            f"B = 1 to 2 includes that change (`--backend eager` runs one kernel throughout).")
