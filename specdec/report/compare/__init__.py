"""Reports read back: two reports compared (`compare`, its cost terms and work rows) and many reports turned into a
calibration (`calibrate`).

May import report's base and `specdec.measure`; imported by `report.build` and cli."""
