"""Served load: the request driver, the arrival schedule, the window statistics and the crossover rule that `batch`
shares.

May import measure's core and `specdec.engines`; imported by report (load_render, batch_section) and cli."""
