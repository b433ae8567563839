"""`python -m specdec.cli`: the same as the `specdec` command."""

import sys

from specdec.cli.commands import main

sys.exit(main())
