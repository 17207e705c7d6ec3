"""Entry point: `python3 scripts/plots SUBCOMMAND ...` (or `python3 -m plots` with scripts/ on the path)."""

import os
import sys

if __package__ in (None, ""):  # run as a directory: make `plots` importable as a package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from plots import require_matplotlib, run_main  # noqa: E402

require_matplotlib("plots")

from plots.cli import main  # noqa: E402

sys.exit(run_main("plots", main))
