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
# A leading zero: yaml-cpp would read it as octal and fail later (found by fuzzing); refused at load instead.
printf 'stage1:\n  batch_size: 0888\n' > zero.yaml
err=$("$D" --config zero.yaml --dump-config 2>&1); rc=$?
check "leading-zero integer refused at load" '[[ $rc -eq 2 && "$err" == *"stage1.batch_size"*"must be an integer"* ]]'

err=$("$D" --no-such-flag 2>&1); rc=$?
check "unknown flag exits 2" '[[ $rc -eq 2 ]]'

# Every registered subcommand answers --help with exit 0.
subs=$("$D" --help | awk '/^Subcommands:/{f=1;next} f&&/^  [a-z]/{print $1}')
for s in $subs; do
  "$D" "$s" --help >/dev/null 2>&1; rc=$?
  check "$s --help" '[[ $rc -eq 0 ]]'
done
# The run directory keeps the resolved config; a later run with other values names the changed keys.
"$D" cache verify --split nosuch --set run.root=runsA >/dev/null 2>&1
check "config.yaml saved in the run directory" '[[ -f runsA/quickstart/config.yaml ]] && grep -q "seed: 1234" runsA/quickstart/config.yaml'
cp runsA/quickstart/config.yaml saved_first.yaml
err=$("$D" cache verify --split nosuch --set run.root=runsA --set run.seed=99 2>&1)
check "changed config keys are named" '[[ "$err" == *"config differs"*"run.seed"* ]]'
check "config.yaml updated" 'grep -q "seed: 99" runsA/quickstart/config.yaml'
check "the previous config.yaml kept" 'cmp -s saved_first.yaml runsA/quickstart/config.history/*.yaml'

# srun without PMIx: world 1 while SLURM_NTASKS says 4 -> stop at once with the explanation.
err=$(SLURM_NTASKS=4 "$D" cache verify --split nosuch --set run.root=runsB 2>&1); rc=$?
check "srun without PMIx refused" '[[ $rc -eq 1 && "$err" == *"without PMIx"* ]]'

# The pipeline builds each step's options afresh (issue 25): the plan prints each step's own flags, so a --clean
# or --for of one step does not reach the next, and no step forces.
plan=$("$D" pipeline --dry-run --set run.root=runsC --set reference.enabled=false 2>/dev/null); rc=$?
check "pipeline --dry-run exits 0" '[[ $rc -eq 0 ]]'
check "cache train without --clean" 'grep -q "daei cache build --split train$" <<<"$plan"'
check "cache val with --clean" 'grep -q "daei cache build --split val --clean$" <<<"$plan"'
check "stage 1 resumes" 'grep -q "daei train --stage 1 --resume$" <<<"$plan"'
check "each corrector's own --for" '[[ "$plan" == *"--for 4"*"--stage 4 --resume"*"--for dae-corrector"* ]]'
check "no step forces" '[[ "$plan" != *"--force"* ]]'
check "no continued corrector by default" '[[ "$plan" != *"dae-continued-corrector"* ]]'
# stage4.continued_corrector (issue 46): dae-corrected over stage2-continued, after that control and its hypotheses.
plan=$("$D" pipeline --dry-run --set run.root=runsC --set reference.enabled=false \
  --set stage4.continued_corrector=true 2>/dev/null); rc=$?
check "continued corrector planned" '[[ $rc -eq 0 && "$plan" == *"--stage stage2-continued --resume"*"--for dae-continued-corrector"*"--stage dae-continued-corrector --resume"* ]]'

# DAEI_T5_KERNELS (which fused T5 kernels run; issue 24): a value it does not know stops every command before it
# writes anything, in one line.
err=$(DAEI_T5_KERNELS=dropout,bogus "$D" corpus build --set run.root=runsD 2>&1); rc=$?
check "bad DAEI_T5_KERNELS refused" '[[ $rc -eq 2 && "$err" == *"DAEI_T5_KERNELS="*"bogus"*"is not one of all, none"* && $(wc -l <<<"$err") -eq 1 ]]'
check "bad DAEI_T5_KERNELS wrote nothing" '[[ ! -e runsD ]]'

echo "cli: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
