"""The work counter: instructions per call counted under a hardware counter or callgrind (`work`), the counting pool
that runs one child per tree and layout (`work_pool`), the callgrind dump reader (`work_dump`) and the calibrations
that set the work gate's thresholds (`work_calibration`).

Imports only the standard library and `specdec.util`; the counting child is the worker script at measure's top
(`ab_worker.py`, run by path). Imported by `ab`, `yours`, report's compare and cli."""
