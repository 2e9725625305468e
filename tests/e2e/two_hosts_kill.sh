#!/usr/bin/env bash
# A killed node in a two-node job (issue 33): stage 2 of the toy run on emu1 + emu2 of an emulated Slurm
# cluster (launch/emulate_cluster.sh); every process of emu2 is SIGKILLed mid-run. The job ends
# within 60 s, non-zero, with one clear line; no rank is left; the run directory is intact; resubmitted with --resume
# on emu3 + emu4 it ends bitwise equal to an uninterrupted run. See tests/support/two_hosts_fault.sh. Needs root.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
D=$BUILD/daei
# shellcheck source=tests/support/two_hosts.sh
source "$SRC/tests/support/two_hosts.sh"
# shellcheck source=tests/support/two_hosts_fault.sh
source "$SRC/tests/support/two_hosts_fault.sh"
th_fault kill
say "OK"
