#!/usr/bin/env bash
# Every command README.md gives runs as written, and every config key it names exists.
# Commands: each line of README.md's ```bash blocks, each command in backticks in its prose (`launch/...`,
# `bench/...`, `studies/...`, `build/daei ...`, `daei SUBCOMMAND ...`), and each command line of every launch/, bench/,
# studies/ and tests/repeat/ script's usage comment (its leading comment block, or a Python script's docstring). For
# each, the file it names exists, is executable when the line runs it directly (not through `bash X`, `python3 X`,
# `sbatch X`), and answers --help with exit 0 and nothing written to the checkout; a daei subcommand answers
# `daei SUBCOMMAND --help`, a configs/ file named exists. Every script under those folders with a #! line counts as
# run directly (executable, on disk and in git's index, and answers --help); every shell script has a #! line.
# Keys: every config key README.md writes in backticks (`eval.num_beams`, `stage3.select_by: heldout_bleu`,
# `train.precision=bf16`, `eval.*`, `stageK.eval_every` with K standing for any stage) and every `--set key=value` of a
# command above exists in the defaults `daei --dump-config` prints; a value given with it is accepted by
# `daei --dump-config --set key=value`.
set -uo pipefail
# shellcheck source=tests/support/e2e_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_common.sh"
BUILD=$(cd "$1" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
D=$BUILD/daei
cd "$SRC" || exit 1
e2e_tmp
fails=0 passes=0
pass() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Scripts whose lines need root, a GPU or a long run: for these only the first two checks (the file exists; it is
# executable where a line runs it directly). They are never executed here, not even with --help: a --help that
# stopped working would install packages, mount, build or start a long run, as root under CI.
HEAVY=(
  launch/setup.sh            # root: apt-get install, downloads the assets
  launch/quickstart.sh       # root (runs setup.sh), a build, the 33-min pipeline
  launch/test.sh             # setup.sh, a build, the whole ctest suite (this test included)
  launch/build.sh            # cmake configure and build
  launch/emulate_cluster.sh  # root: network namespaces, a bridge, munged, slurmctld, slurmd
  tests/repeat/bad_disk_loop.sh  # root: mounts a tmpfs; 50 MPI runs
  launch/gpu_check.sh        # a CUDA device and a build of its own (its --cpu-only part: e2e_gpu_check_cpu)
)
# Scripts that pass their arguments on to another, which reads --help (argparse there).
declare -A HELP_BY=(
  [bench/run.sh]=bench/runner.py  # exec /usr/bin/python3 bench/runner.py "$@"
)
is_heavy() { [[ " ${HEAVY[*]} " == *" $1 "* ]]; }

# Mode of a file in git's index (empty when untracked or no git), so that a run bit set only on disk is caught.
index_mode() { git -C "$SRC" ls-files -s -- "$1" 2>/dev/null | cut -d' ' -f1; }
executable() {  # FILE WHERE LINE
  local f=$1 path=$1 mode
  [[ $f == build/daei ]] && path=$D
  if [[ ! -x $path ]]; then
    fail "$2: $f is not executable, and the line runs it directly: $3"
    return
  fi
  mode=$(index_mode "$f")
  if [[ -n $mode && $mode != 100755 ]]; then
    fail "$2: $f is committed without its run bit ($mode; git update-index --chmod=+x), and the line runs it directly: $3"
    return
  fi
  pass
}

# The plan: what README.md and the usage comments name, one tab-separated line a check (deduplicated, first place).
#   RUN  WHERE FILE HOW LINE   HOW: direct, or the interpreter that runs FILE (bash, sh, python3, /usr/bin/python3, sbatch)
#   SUB  WHERE WORDS LINE      a daei subcommand (one or two words)
#   CFG  WHERE PATH LINE       a configs/ file named in a command
#   KEY  WHERE KEY VALUE       a config key (VALUE empty when none is given or it is a placeholder)
python3 - "$SRC" >"$T/plan.tsv" <<'PY'
import os, re, sys

src = sys.argv[1]
os.chdir(src)
FILE = re.compile(r"^(?:(?:launch|bench|studies|tests/repeat)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:sh|py|sbatch)|build/daei)$")
INTERP = {"bash", "sh", "python3", "python", "/usr/bin/python3", "sbatch"}
LAUNCHER = {"mpirun", "srun"}
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# A backticked section.key[.key...] (or section.*), optionally with ": value" or "=value".
KEY = re.compile(r"^([a-z][A-Za-z0-9_]*(?:\.(?:[A-Za-z0-9_]+|\*))+)(?:\s*(?::\s+|=)(\S.*))?$")
# Dotted words in backticks that are not config keys: file names, and Python modules named in the prose.
EXT = {"md", "json", "jsonl", "yaml", "yml", "png", "txt", "log", "sh", "py", "c", "cpp", "h", "so", "sbatch",
       "safetensors", "npy", "csv", "deb"}
NOT_CONFIG = {"torch", "nvidia"}  # torch.utils.cmake_prefix_path, nvidia.* (README "NCCL")
plan, seen = [], set()


def emit(*row):
    k = row[0:1] + (row[2:4] if row[0] in ("RUN", "KEY") else row[2:3])
    if k not in seen:
        seen.add(k)
        plan.append("\t".join(row))


def command(seg, where, keys_too=True):
    """Checks for one command (a code line, a backticked span, a usage line); ignores text that is not a command."""
    seg = re.sub(r"\s+", " ", seg.split(" #")[0]).strip()
    w = seg.split(" ")
    i = 0
    while i < len(w) and (w[i] == "sudo" or ASSIGN.match(w[i])):
        i += 1
    if i < len(w) and w[i] == "env":
        i += 1
        while i < len(w) and (w[i].startswith("-") or ASSIGN.match(w[i])):
            i += 2 if w[i] == "-u" else 1
    if i >= len(w):
        return
    head = w[i]
    if head in ("daei", "build/daei"):
        subs = [x for x in w[i + 1:i + 3] if re.fullmatch(r"[a-z][a-z-]*", x)]
        if subs and w[i + 1] == subs[0]:
            emit("SUB", where, " ".join(subs[:2] if len(subs) == 2 and w[i + 2] == subs[1] else subs[:1]), seg)
        if head == "daei":
            return
    elif not (FILE.match(head) or head in INTERP or head in LAUNCHER):
        return
    for j in range(i, len(w)):
        if FILE.match(w[j]):
            k = j - 1
            while k >= i and w[k].startswith("-"):
                k -= 1
            how = w[k] if k >= i and w[k] in INTERP else "direct"
            emit("RUN", where, w[j], how, seg)
        elif w[j].startswith("configs/") and re.fullmatch(r"[A-Za-z0-9_./-]+\.yaml", w[j]):
            emit("CFG", where, w[j], seg)
        elif w[j] == "--set" and j + 1 < len(w) and keys_too:
            m = re.fullmatch(r"([a-z][a-z0-9_.]*)=(.*)", w[j + 1])
            if m and "." in m[1]:
                emit("KEY", where, m[1], m[2])


# README.md: fenced ```bash blocks line by line; backticked spans of the prose (a span may wrap a line).
readme = open("README.md", encoding="utf-8").read().split("\n")
in_block, prose = None, []
for n, line in enumerate(readme, 1):
    if line.startswith("```"):
        in_block = None if in_block is not None else line[3:].strip()
        continue
    if in_block is not None:
        if in_block in ("bash", "sh", ""):
            command(line, f"README.md:{n}")
        continue
    prose.append((n, line))
text = "\n".join(l for _, l in prose)
starts = [0]
for _, l in prose:
    starts.append(starts[-1] + len(l) + 1)
for m in re.finditer(r"`([^`]+)`", text):
    n = prose[max(k for k in range(len(prose)) if starts[k] <= m.start())][0]
    span = re.sub(r"\s+", " ", m[1]).strip()
    command(span, f"README.md:{n}")
    k = KEY.match(span)
    if k and k[1].split(".")[0] not in NOT_CONFIG and not any(p in EXT or p.isdigit() for p in k[1].split(".")[1:]):
        value = k[2] or ""
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", value):  # a placeholder such as DIR
            value = ""
        emit("KEY", f"README.md:{n}", k[1], value)


def usage_lines(path):
    """(line number, text, indented) of the leading comment block (shell) or the leading comments and docstring."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, n = [], 1 if lines and lines[0].startswith("#!") else 0
    while n < len(lines) and lines[n].startswith("#") and not lines[n].startswith("#SBATCH"):
        t = lines[n][1:]
        out.append((n + 1, t[1:] if t.startswith(" ") else t))
        n += 1
    if path.endswith(".py") and n < len(lines) and lines[n].lstrip().startswith(('"""', "'''")):
        q = lines[n].lstrip()[:3]
        first = lines[n].lstrip()[3:]
        out.append((n + 1, "\x00" + first.split(q)[0]))  # the opening line is never indented usage
        if q not in first:
            n += 1
            while n < len(lines):
                out.append((n + 1, lines[n].split(q)[0]))
                if q in lines[n]:
                    break
                n += 1
    return out


scripts = sorted(p for d in ("launch", "bench", "studies", "tests/repeat") for r, _, fs in os.walk(d)
                 for p in (os.path.join(r, f) for f in fs) if p.endswith((".sh", ".py", ".sbatch")))
for path in scripts:
    for n, t in usage_lines(path):
        where = f"{path}:{n}"
        for m in re.finditer(r"`([^`]+)`", t):
            command(m[1], where)
        t = re.sub(r"`[^`]*`", " ", t)
        segs = re.split(r" {2,}", t)
        # The first segment is a command only on an indented line (#   launch/x.sh ARGS); after two or more spaces
        # in a line (   e.g.  launch/x.sh ...) any segment may be one.
        for k, s in enumerate(segs):
            if k == 0 and (t.startswith("\x00") or not t.startswith("  ")):
                continue
            command(s, where)
# A script with a #! line is one a reader may run directly: it is executable and answers --help too.
for path in scripts:
    if open(path, encoding="utf-8").readline().startswith("#!"):
        emit("RUN", f"{path}:1", path, "direct", "(a script with a #! line)")
print("\n".join(plan))
PY
[[ -s $T/plan.tsv ]] || { echo "FAIL: no plan (the README or usage parser failed)"; exit 1; }

# (1) Every shell script has a #! line (that every script with one is executable is a RUN line of the plan).
for f in launch/*.sh launch/slurm/*.sbatch bench/*.sh studies/*/*.sh tests/repeat/*.sh; do
  if [[ $(sed -n 1p "$f") == '#!'* ]]; then pass; else fail "$f: a shell script without a #! line"; fi
done

# (2) The commands.
[[ -x $D ]] || fail "$D is not built"
status_before=$(git status --porcelain --untracked-files=all -- . ':(exclude)build' ':(exclude)runs' 2>/dev/null)
export PYTHONDONTWRITEBYTECODE=1
declare -A helped=()
answers_help() {  # WHERE FILE HOW LINE: FILE --help (through HOW) exits 0, prints something, writes nothing here
  local where=$1 f=$2 how=$3 line=$4 cmd rc new
  case $how in
    direct) cmd=("./$f") ;;
    sbatch | sh) cmd=(bash "$f") ;;
    *) cmd=("$how" "$f") ;;
  esac
  [[ $f == build/daei ]] && cmd=("$D")
  [[ -n ${helped["${cmd[*]}"]:-} ]] && return
  helped["${cmd[*]}"]=1
  # Never start a script that shows no sign of reading --help: it would run for real.
  if [[ $f != build/daei ]] && ! grep -e '--help' -e 'argparse' "$f" "${HELP_BY[$f]:-/dev/null}" >/dev/null; then
    fail "$where: $f does not answer --help (no --help in it; add one or a dry run): $line"
    return
  fi
  touch "$T/stamp"
  timeout 60 "${cmd[@]}" --help </dev/null >"$T/help.out" 2>&1
  rc=$?
  new=$(find "$SRC" \( -path "$SRC/.git" -o -path "$SRC/build" -o -path "$BUILD" -o -path "$SRC/runs" \) -prune -o \
    -newer "$T/stamp" -print)
  if [[ $rc -ne 0 ]]; then
    fail "$where: '${cmd[*]} --help' exited $rc: $(tail -c 300 "$T/help.out" | tr '\n' ' ')"
  elif [[ ! -s $T/help.out ]]; then
    fail "$where: '${cmd[*]} --help' printed nothing"
  elif [[ -n $new ]]; then
    fail "$where: '${cmd[*]} --help' wrote into the checkout: $(tr '\n' ' ' <<<"$new")"
  else
    pass
  fi
}
while IFS=$'\t' read -r kind where a b line; do
  case $kind in
    RUN)
      path=$a
      [[ $a == build/daei ]] && path=$D
      if [[ ! -f $path ]]; then fail "$where: $a does not exist: $line"; continue; fi
      pass
      [[ $b == direct ]] && executable "$a" "$where" "$line"
      is_heavy "$a" || answers_help "$where" "$a" "$b" "$line"
      ;;
    SUB)
      [[ -x $D ]] || continue
      read -ra words <<<"$a"
      if "$D" "${words[@]}" --help </dev/null >"$T/sub.out" 2>&1; then pass; else
        fail "$where: 'daei $a --help' exited $?: $(tail -c 200 "$T/sub.out" | tr '\n' ' ') (line: $line)"
      fi
      ;;
    CFG) if [[ -f $a ]]; then pass; else fail "$where: $a does not exist: $line"; fi ;;
  esac
done <"$T/plan.tsv"
status_after=$(git status --porcelain --untracked-files=all -- . ':(exclude)build' ':(exclude)runs' 2>/dev/null)
new_status=$(comm -13 <(sort <<<"$status_before") <(sort <<<"$status_after"))
if [[ -n $new_status ]]; then fail "the checks changed git status: $(tr '\n' ' ' <<<"$new_status")"; else pass; fi

# (3) The keys, against the defaults daei dumps.
if [[ -x $D ]]; then
  if ! "$D" --dump-config >"$T/defaults.yaml" 2>"$T/dump.err"; then
    fail "daei --dump-config failed: $(tr '\n' ' ' <"$T/dump.err")"
  else
    # Flatten the dump (block YAML, two spaces a level) into section.key[.key] paths, mappings included.
    python3 - "$T/defaults.yaml" >"$T/keys.txt" <<'PY'
import re, sys
path = []
for line in open(sys.argv[1]):
    m = re.match(r"^( *)([A-Za-z0-9_]+):(\s|$)", line)
    if not m:
        continue
    depth = len(m[1]) // 2
    path = path[:depth] + [m[2]]
    print(".".join(path))
PY
    sets=()
    while IFS=$'\t' read -r kind where key value; do
      [[ $kind == KEY ]] || continue
      # section.* names a section; an upper-case part (stageK) stands for any lower-case name or number.
      re=${key//./\\.}
      re=${re//\*/[a-z0-9_]+}
      re=$(sed -E 's/[A-Z]+/[a-z0-9_]+/g' <<<"$re")
      if grep -E "^$re\$" "$T/keys.txt" >/dev/null; then pass; else
        near=""  # daei's own suggestion of the nearest key
        [[ $key != *[A-Z*]* ]] && near=$("$D" --dump-config --set "$key=0" 2>&1 | grep -o "did you mean '[^']*'")
        fail "$where: config key '$key' is not in the defaults (daei --dump-config)${near:+; $near?}"
        continue
      fi
      [[ -n $value && $key != *[A-Z*]* ]] && sets+=("$where" "$key=$value")
    done <"$T/plan.tsv"
    # Values named with a key: accepted by the config rules (one run for all; on a refusal, one a key).
    args=()
    for ((i = 1; i < ${#sets[@]}; i += 2)); do args+=(--set "${sets[i]}"); done
    if ((${#args[@]})) && ! "$D" --dump-config "${args[@]}" >/dev/null 2>&1; then
      for ((i = 0; i < ${#sets[@]}; i += 2)); do
        if ! err=$("$D" --dump-config --set "${sets[i + 1]}" 2>&1 >/dev/null); then
          fail "${sets[i]}: --set ${sets[i + 1]} refused: $err"
        fi
      done
    elif ((${#args[@]})); then
      pass
    fi
  fi
fi

echo "readme_commands: $passes passed, $fails failed ($(grep -c '^RUN' "$T/plan.tsv") command files, $(grep -c '^SUB' "$T/plan.tsv") subcommands, $(grep -c '^KEY' "$T/plan.tsv") keys checked)"
[[ $fails -eq 0 ]]
