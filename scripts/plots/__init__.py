"""poslab's plots: poslab computes the numbers and writes JSON; these modules draw them.

Modules, one per family of pictures:

  style       shared look: colour maps, figure sizes, heat maps with colour bars, atomic saving
  encodings   `poslab pe --plot`: what each positional encoding is (dispatch on the JSON's family and keys)
  attention   `poslab attention`: statistics and maps of a trained run's attention, and compare's summary
  cli         the command line: python3 scripts/plots {pe,attention,compare-attention} ...

Needs numpy and matplotlib; `require_matplotlib` re-executes under Debian's /usr/bin/python3 when
the interpreter that started lacks them (pyenv's python3 on PATH often does).
"""

import os
import sys


def require_matplotlib(tool):
    """Imports numpy and matplotlib, or re-executes once under /usr/bin/python3, or exits 1 saying why."""
    try:
        import numpy  # noqa: F401
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system) and os.access(system, os.X_OK) \
            and not os.environ.get("POSLAB_PLOT_REEXEC"):
        os.environ["POSLAB_PLOT_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    sys.stderr.write("%s: needs numpy and matplotlib (Debian: apt install python3-matplotlib)\n" % tool)
    sys.exit(NO_MATPLOTLIB)


# Exit statuses the C++ side tells apart: no matplotlib (plots skipped, not a failure of the run) and a file
# that could not be written (a full disk, a directory in the way), said in one line.
NO_MATPLOTLIB = 3
WRITE_FAILED = 4


def run_main(tool, main):
    """Runs an entry point's main(), turning an OSError (ENOSPC, EISDIR, EACCES) into one line and WRITE_FAILED."""
    try:
        return main()
    except OSError as e:
        where = " %s" % e.filename if getattr(e, "filename", None) else ""
        sys.stderr.write("%s: cannot write%s: %s\n" % (tool, where, e.strerror or e))
        return WRITE_FAILED
