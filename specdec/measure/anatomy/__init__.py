"""Where a pass's and a round's time goes: the roofline, the profiler's operator split, ONNX Runtime's profile, the
overhead attribution, tree rounds and batched rows' costs.

May import measure's core, `specdec.model` and `specdec.decoding`; imported by report and cli."""
