"""The report: sections measured under one time budget, rendered as Markdown, JSON and figures; compare and
calibrate read reports back.

`specdec.report.measure(...)` measures a report document and `specdec.report.write(doc, out_dir, markdown)`
puts it on disk; both live in `build`.
"""

from specdec.report.build import DEFAULT_KS, FULL, QUICK, SHARES, STARTUP, measure, recommend, write

__all__ = ["DEFAULT_KS", "FULL", "QUICK", "SHARES", "STARTUP", "measure", "recommend", "write"]
