"""The report's overhead section: where a pass's time goes, measured (`overhead_section`) and rendered
(`overhead_text`).

May import report's base and `specdec.measure`; imported by `report.build` and `report.render`."""
