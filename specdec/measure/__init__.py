"""Measurement. The core at this level is what every capability shares: the clock and its hygiene, the side-by-side
turns every timed comparison takes (`turns`), timers, the time-budget scheduler, statistics, exactness, acceptance,
workloads, cost terms and the machine's calibration record. The rooms below it are `work` (instructions counted),
`ab` (two revisions alternated), `load` (served load), `anatomy` (where a pass's time goes) and `yours` (the user's
own code); docs/architecture.md maps them."""
