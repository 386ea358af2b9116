"""`python -m opsim`: the `opsim` command."""
import sys

from opsim.cli import main

sys.exit(main())
