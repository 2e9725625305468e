#!/usr/bin/python3
"""Re-writes bench/results.md from bench/results.json (e.g. after bench/notes.md changed), without re-running."""
import json, os, sys
if sys.argv[1:] in (["-h"], ["--help"]):
    print(__doc__.strip())
    sys.exit(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner
d = os.path.dirname(os.path.abspath(__file__))
r = json.load(open(os.path.join(d, "results.json")))
open(os.path.join(d, "results.md"), "w").write(runner.markdown(r["meta"], runner.latest_by_name(r["entries"])))
