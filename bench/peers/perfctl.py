"""DAEI_PERF_CTL=FIFO (bench/peers/perf_profile.py): the peers' scripts write "enable" to perf record's control fifo when
their timed repetitions start and "disable" when they end, as bench_peers does, so a profile holds the measured work
alone. Without the variable nothing happens."""
import os


def perf_ctl(what):
    p = os.environ.get("DAEI_PERF_CTL")
    if p:
        with open(p, "w") as f:
            f.write(what + "\n")
