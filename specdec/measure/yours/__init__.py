"""The user's own code: the bench users' asv suites run (`user_bench`), the asv environment plugin (`asv_env`) and the
pytest fixture (`pytest_pair`). Users' files name these modules by their old paths too
(`specdec.measure.user_bench`, `.asv_env`, `.pytest_pair`: aliases at measure's top).

May import measure's core and `work`; imported by cli (asv-init) and users' files."""
