"""`specdec.measure.pytest_pair` is now `specdec.measure.yours.pytest_pair`: users' files written before the move (asv.conf.json's
plugins, asv-init's benchmarks, conftest.py's pytest_plugins) name the old path, so this alias keeps it working.
The alias is the same module object, not a copy."""

import sys

from specdec.measure.yours import pytest_pair as _module

sys.modules[__name__] = _module
