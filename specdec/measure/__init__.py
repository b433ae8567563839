"""Measurement: timers and hygiene, the time-budget scheduler, statistics, exactness, workloads, cost terms,
overhead attribution and the machine's calibration record."""
