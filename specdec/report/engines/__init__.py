"""Engines and backends side by side: `specdec engines`' document (`engine_build`, `engine_render`), the per-backend
finding (`backend_report`) and the served-load report (`load_render`).

May import report's base and `specdec.measure`; imported by cli."""
