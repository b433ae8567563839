"""`specdec ab`'s document rendered: its rows, verdicts and what it could not check.

May import report's base and `specdec.measure.ab.ab`; imported by cli."""
