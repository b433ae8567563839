"""The asv regression demonstration as a test (slow: builds two per-commit environments; run with -m slow)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("asv") is None, reason="needs asv (pip install -e '.[bench]')")
def test_asv_flags_a_20_percent_slower_draft_and_not_a_no_op():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "regression_demo.py")], capture_output=True,
                          text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "slower commit flagged: True; no-op commit flagged: False" in proc.stdout
