"""`specdec.measure.asv_env` is now `specdec.measure.yours.asv_env`: users' files written before the move (asv.conf.json's
plugins, asv-init's benchmarks, conftest.py's pytest_plugins) name the old path, so this alias keeps it working.
The alias is the same module object, not a copy."""

import sys

from specdec.measure.yours import asv_env as _module

sys.modules[__name__] = _module
