#!/usr/bin/env bash
# The command line contract: --help lists subcommands, --dump-config, one-line errors with exit 2 for usage.
set -uo pipefail
BUILD=$1
D="$BUILD/daei"
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$(mktemp -d)"

out=$("$D" --help); rc=$?
check "--help exits 0" '[[ $rc -eq 0 ]]'
check "--help names the tool" '[[ "$out" == *"noise-protected text embeddings"* ]]'

out=$("$D" --dump-config --set run.seed=77); rc=$?
check "--dump-config exits 0" '[[ $rc -eq 0 ]]'
check "--dump-config shows the --set value" '[[ "$out" == *"seed: 77"* ]]'

err=$("$D" --dump-config --set run.sed=3 2>&1 >/dev/null); rc=$?
check "misspelled key exits 2" '[[ $rc -eq 2 ]]'
check "misspelled key: one line" '[[ $(printf "%s\n" "$err" | wc -l) -eq 1 ]]'
check "misspelled key names key and suggestion" '[[ "$err" == *"run.sed"* && "$err" == *"did you mean '"'"'run.seed'"'"'"* ]]'

printf 'run:\n  seed: notanumber\n' > bad.yaml
err=$("$D" --dump-config --config bad.yaml 2>&1 >/dev/null); rc=$?
check "wrong type in file exits 2 naming file and key" '[[ $rc -eq 2 && "$err" == *"bad.yaml"* && "$err" == *"run.seed"* ]]'

err=$("$D" --no-such-flag 2>&1); rc=$?
check "unknown flag exits 2" '[[ $rc -eq 2 ]]'

# Every registered subcommand answers --help with exit 0.
subs=$("$D" --help | awk '/^Subcommands:/{f=1;next} f&&/^  [a-z]/{print $1}')
for s in $subs; do
  "$D" "$s" --help >/dev/null 2>&1; rc=$?
  check "$s --help" '[[ $rc -eq 0 ]]'
done
echo "cli: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
