#!/usr/bin/env python3
"""Plots and a report for one `poslab compare` results directory.

Usage: plot_report.py RESULTS_DIR

Writes loss_curves.png, extrapolation.png, position_loss.png, attention.png (when the cells have
attention.json), report.md and report.html into RESULTS_DIR. The work is done by the plots package
beside this file (scripts/plots/report.py); this is the entry point `poslab compare` calls.

Needs numpy and matplotlib (Debian: /usr/bin/python3 has both; re-executed under it when the
interpreter that started lacks them). Exit status: 0 on success, 2 when results.json is missing or
malformed, 3 without numpy or matplotlib, 4 when a file cannot be written (one line naming it).
"""

import os
import signal
import sys


def _stop(*_):
    """Ctrl-C (which reaches compare and this script together) ends it quietly with 130, not with a
    traceback; compare then says the report was interrupted. It leaves through os._exit, not sys.exit:
    a SystemExit raised where Python ignores exceptions (a finalizer run mid-import) would let the
    script carry on and exit 0. The temp file being written goes first (no finally runs)."""
    style = sys.modules.get("plots.style")
    if style is not None:
        style.remove_partial()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(130)


signal.signal(signal.SIGINT, _stop)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from plots import require_matplotlib, run_main  # noqa: E402

require_matplotlib("plot_report")

from plots.report import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_main("plot_report", main))
