"""B sequences at once: the batch section measured (`batch_section`), rendered (`batch_render`) and `specdec batch`'s
own document (`batch_build`).

May import report's base and `specdec.measure`; imported by `report.build`, `report.render` and cli."""
