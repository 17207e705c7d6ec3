"""Ctrl-C while plot_report.py saves a picture: it exits 130 without a traceback, and the temp file the
picture was being written to is gone (the handler leaves with os._exit, so no `finally` removes it).
The save is held open by a stand-in for savefig that writes half a file and waits, so the signal lands
mid-write every time. Usage: interrupt_check.py SCRIPTS_DIR FIXTURE_RESULTS_DIR"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

scripts, fixture = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp()
try:
    out = os.path.join(work, "compare")
    shutil.copytree(fixture, out)
    child = r'''
import runpy, sys, time
import matplotlib.figure
def held(self, fname, *args, **kwargs):
    open(fname, "w").write("half")
    print("WRITING " + fname, flush=True)
    time.sleep(60)
matplotlib.figure.Figure.savefig = held
sys.argv = ["plot_report.py", sys.argv[1]]
runpy.run_path(%r, run_name="__main__")
''' % os.path.join(scripts, "plot_report.py")
    p = subprocess.Popen([sys.executable, "-c", child, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("WRITING "), (line, p.stderr.read())
    tmp = line[len("WRITING "):]
    assert os.path.exists(tmp) and ".tmp" in os.path.basename(tmp), tmp
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=30)
    err = p.stderr.read()
    assert rc == 130, (rc, err)
    assert "Traceback" not in err, err
    assert not os.path.exists(tmp), "temp file left: " + tmp
    left = [f for f in os.listdir(out) if ".tmp" in f]
    assert not left, left
finally:
    shutil.rmtree(work)
print("ok: interrupted mid-save, exit 130, temp file removed")
