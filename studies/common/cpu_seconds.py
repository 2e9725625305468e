#!/usr/bin/env python3
"""Runs a command and writes the CPU seconds (user + system) of everything it waited for — every rank under mpirun —
to a file: the cost of a training, whatever else shares the machine.
  studies/common/cpu_seconds.py OUT_FILE COMMAND [ARGS...]     (exits with the command's status)"""
import resource
import subprocess
import sys

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
rc = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write(f"{u.ru_utime + u.ru_stime:.1f}\n")
sys.exit(rc)
