"""README.md opens with the two set-up commands, and CI runs the second one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands():
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_readme_opens_with_main_job_and_test_commands():
    main, tests = _commands()[:2]
    for cmd in (main, tests):
        assert cmd.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && ")
    assert main.endswith("specdec report") and "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci


def test_package_torch_range_stays_open():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"torch>=2.2"' in pyproject and "torch==" not in pyproject
