"""The asv suite: its own measuring method (harness.py) over the public API only (common.py), fixed across
commits while the package under test varies. See README, "Tracking over commits and machines (asv)".

asv reads every tracked figure as lower-is-better (it has no other direction), so every `track_*` here is one
of the lower-is-better forms below, and a regression shows as `+` (worse) in `asv continuous` and
`asv compare`. tests/test_benchmarks_suite.py fails on any `track_*` not in this list. The timed figures reach
asv as samples (harness.sampled), so that it judges them by their spread as well as by the factor.
"""

import os

# numpy's BLAS (the numpy backend's matmuls) starts one thread per core unless told before it loads; torch's
# set_num_threads does not reach it. Fixed here, before any benchmark imports numpy, to the suite's threads --
# an environment variable, so that it holds at every commit whatever the package offers.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, os.environ.get("SPECDEC_BENCH_THREADS", "1"))

LOWER_IS_BETTER = {
    "track_relative_time": "a call's time in runs of the suite's reference kernel (harness.reference), measured "
                           "in the same round-robin: a target pass, a drafted character, a target-only generation",
    "track_c": "c: one drafted character's time in single-position target passes",
    "track_verify_over_single": "T(k+1)/T(1): a (k+1)-position verify pass's time in single-position passes",
    "track_weight_bytes": "a draft's weights, packed as the draft stores them, in bytes",
    "track_rejection": "rejected / drafted characters (1 - acceptance)",
    "track_passes_per_char": "target passes per generated character (1 / chars per pass)",
    "track_time_ratio": "speculative / target-only generation time (1 / speedup)",
    "track_overhead_share": "1 - roofline floor / measured time of a single-position target pass, per backend: "
                            "the share of the pass that is overhead (the floor from pass_flops, pass_bytes and "
                            "measure_machine)",
    "track_instructions": "instructions per call of a pass, a generation (work, counted: callgrind where the "
                          "machine has no hardware counter)",
    "track_instructions_per_token": "instructions per drafted token of a draft's proposal",
    "track_instructions_per_round": "instructions per speculative round, the draft's own work left out",
    "track_exactness_failed": "1 if the first speculative character fails a chi-square test against the "
                              "target's distribution at alpha 0.001 (fixed seeds), else 0",
}
