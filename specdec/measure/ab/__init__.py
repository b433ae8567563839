"""Two revisions alternated: `specdec ab`'s worker processes and schedule (`ab`), where the revisions come from
(`ab_sources`), the timed rows' statistics (`ab_stats`), the work rows' verdict (`ab_work`), bisect's search
(`bisect`) and the cost table's counted calls (`work_costs`).

May import measure's core and `work`; imported by report (ab_render, compare_work, render) and cli."""
