"""The fewest alternated pairs a timed row gets before the rest of a budget goes to the widest rows.

One number for the report (`report.build.FULL` and `QUICK`, `--quick` too: fewer leave the headline's rows without
a verdict on a slower machine), `specdec batch`, and the command line's help, which names it without importing
torch: so this module imports nothing.
"""

MIN_PAIRS = 5
