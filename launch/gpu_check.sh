#!/usr/bin/env bash
# The first thing to run the day a CUDA device is lent (about 15 minutes of device time; this takes at most 8,
# GPU_CHECK_BUDGET_S): build daei against the device's libtorch, run stage-1 and stage-2 steps on CUDA in fp32 and
# with bf16 matrix products (train.precision=bf16) with the NCCL communicator at world size 1, compare their first
# losses with the same steps on the CPU (same seed, same data, same binary) and the bf16 run's with the CUDA fp32
# run's, and report the stage-2 step's tokens/s and MFU in both precisions.
#   bash launch/gpu_check.sh [--cpu-only] [--build DIR] [--out DIR]
# Without a CUDA device it says so in one line and exits 0. --cpu-only needs none: the comparison part alone, with
# the second run on the CPU too (dist.backend=mpi against the reference's local) and the build in build/
# (tests/e2e/gpu_check_cpu.sh runs it in CI); where the CPU multiplies bf16 natively (avx512_bf16 or amx_bf16 in
# /proc/cpuinfo) it also runs them with train.precision=bf16 on the CPU and compares those with fp32: stage 1 must
# match exactly (it stays fp32), stage 2 within RTOL_BF16. Exit 1 when a comparison differs or a step fails.
# On the device machine (DESIGN.md "On a lent GPU machine"): libtorch is the Python wheel's
# (torch.utils.cmake_prefix_path), else Debian's; NCCL and the CUDA runtime from /usr/local/cuda or the wheel's
# nvidia.* packages; DAEI_DEBS=DIR unpacks the Debian packages carried there (.deb files) with dpkg -x and builds
# against them. Untried on a GPU so far: what it prints is the record to keep.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
cpu_only=0 BUILD="" OUT=""
while (($#)); do
  case $1 in
    --cpu-only) cpu_only=1 ;;
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "usage: bash launch/gpu_check.sh [--cpu-only] [--build DIR] [--out DIR]"; exit 2 ;;
  esac
  shift
done
BUDGET=${GPU_CHECK_BUDGET_S:-480}
STEPS=5          # first steps whose losses are compared
RTOL_FP32=2e-3   # CUDA fp32 against CPU fp32: other reduction orders; Adam turns tiny gradient differences into
                 # lr-sized steps on near-zero coordinates, so the loss drifts a little from the second step on
RTOL_BF16=5e-2   # bf16 products against fp32: bf16 keeps 8 bits of mantissa
RTOL_CPU=1e-6    # --cpu-only: the same computation twice
say() { printf '[gpu_check %3ds] %s\n' "$SECONDS" "$*"; }
left() { echo $((BUDGET - SECONDS)); }
die() { say "FAIL: $*"; exit 1; }

if ((!cpu_only)); then
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null; then
    echo "gpu_check: no CUDA device on this machine (nvidia-smi lists none); nothing to check"
    exit 0
  fi
fi
OUT=${OUT:-$SRC/runs/gpu-check}
if [[ -d $OUT && -n $(ls -A "$OUT") && ! -f $OUT/.gpu_check ]]; then
  die "$OUT holds files of something else; give an empty or new folder with --out"
fi
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
touch "$OUT/.gpu_check"  # what this script may remove on its next run

# ------------------------------------------------------------------------------------------------- build
py_torch() { python3 -c "import torch; $1" 2>/dev/null; }
# The first file called $1 under the wheels' nvidia/ folder (NCCL, CUDA runtime; their layout differs between CUDA
# versions), "" when none.
py_nvidia_file() {
  local nv
  nv=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])" 2>/dev/null) || return 0
  find "$nv" -name "$1" 2>/dev/null | sort | sed -n 1p
}

build_for_device() {
  BUILD=${BUILD:-$SRC/build-gpu}
  local paths=() args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) prefix nccl cudart lib
  if prefix=$(py_torch 'print(torch.utils.cmake_prefix_path)'); then
    paths+=("$prefix")
    say "libtorch: the Python wheel's, $(py_torch 'print(torch.__version__, "CUDA", torch.version.cuda, "cxx11 ABI", torch._C._GLIBCXX_USE_CXX11_ABI)')"
    [[ $(py_torch 'print(torch._C._GLIBCXX_USE_CXX11_ABI)') == True ]] ||
      say "warning: this libtorch uses the pre-C++11 string ABI, Debian's libraries the C++11 one: linking may fail"
  else
    say "libtorch: no Python torch here, Debian's instead (CPU only: the CUDA steps cannot run with it)"
  fi
  if [[ -n ${DAEI_DEBS:-} ]]; then  # Debian packages carried in: unpacked into a prefix, found like system ones
    local debs=$OUT/debs
    mkdir -p "$debs"
    for d in "$DAEI_DEBS"/*.deb; do dpkg -x "$d" "$debs"; done
    paths+=("$debs/usr")
    export LD_LIBRARY_PATH="$debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$debs/usr/bin:$PATH" OPAL_PREFIX="$debs/usr"
    say "Debian packages from $DAEI_DEBS unpacked into $debs"
  fi
  if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
    nccl=$(py_nvidia_file nccl.h)
    lib=$(py_nvidia_file 'libnccl.so*')
    cudart=$(py_nvidia_file cuda_runtime.h)
    [[ -f /usr/local/cuda/include/cuda_runtime.h ]] && cudart=/usr/local/cuda/include/cuda_runtime.h
    if [[ -n $nccl && -n $lib && -n $cudart ]]; then
      args+=(-DNCCL_INCLUDE="$(dirname "$nccl")" -DNCCL_LIB="$lib" -DCUDART_INCLUDE="$(dirname "$cudart")")
      [[ -d /usr/local/cuda/lib64 ]] || args+=(-DCUDART_LIB="$(py_nvidia_file 'libcudart.so*')")
      LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      export LD_LIBRARY_PATH
      say "NCCL from the wheel: $lib"
    else
      say "no nccl.h in /usr/local/cuda or the wheels: the NCCL communicator will not be built"
    fi
  fi
  [[ -d /usr/local/cuda ]] && args+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
  args+=(-DCMAKE_PREFIX_PATH="$(IFS=';'; echo "${paths[*]}")")
  say "configure: cmake ${args[*]}"
  cmake -S "$SRC" -B "$BUILD" "${args[@]}" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; die "configure"; }
  timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" --target daei >"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; die "build (log: $OUT/build.log)"; }
}

if ((cpu_only)); then
  BUILD=${BUILD:-$SRC/build}
  [[ -x $BUILD/daei ]] || bash launch/build.sh --target daei
else
  build_for_device
fi
D=$BUILD/daei
say "built: $("$D" --version 2>&1 | tr '\n' ' ')"

# ------------------------------------------------------------------------------------------------- data
# Texts of 14 words (more tokens than inverter.max_length_train, so every row is cut to exactly 16 positions),
# embedded with the 4-d GloVe test fixture: seconds on any machine, and the same rows for every run.
RUN=$OUT/gc
mkdir -p "$RUN/corpus"
python3 - "$RUN/corpus/train.jsonl" <<'PY'
import json, sys
words = "the cat sat on mat dog union state people law war peace".split()
with open(sys.argv[1], "w") as f:
    for i in range(2048):
        f.write(json.dumps({"id": i, "text": " ".join(words[(i * 7 + k * k) % len(words)] for k in range(13)) + f" {i}",
                            "source": "x"}) + "\n")
PY
CFG=(--set run.root="$OUT" --set run.name=gc --set "embedder.glove_dir=$SRC/tests/fixtures/glove/mini"
     --set cache.shard_rows=1024 --set dae.hidden=64 --set dae.depth=2
     --set stage1.steps="$STEPS" --set stage1.batch_size=64 --set stage1.warmup_steps=1 --set stage1.eval_every=0
     --set inverter.d_model=64 --set inverter.d_kv=16 --set inverter.num_heads=4 --set inverter.d_ff=128
     --set inverter.num_layers=2 --set inverter.num_decoder_layers=2 --set inverter.repeat_tokens=8
     --set inverter.vocab_size=48 --set inverter.max_length_train=16 --set inverter.dropout=0.0
     --set stage2.steps="$STEPS" --set stage2.batch_size=32 --set stage2.warmup_steps=1 --set stage2.eval_every=0
     --set train.log_every=1 --set train.plot=false --set train.progress_every_s=100.0 --set train.ckpt_every=1000)
"$D" cache build --split train "${CFG[@]}" >"$OUT/cache.log" 2>&1 || { tail -20 "$OUT/cache.log"; die "cache build"; }

# One stage run of one variant: trains into gc/stageK, then moves it to OUT/NAME (the next variant starts fresh).
run_stage() {
  local name=$1 stage=$2 t
  shift 2
  t=$(left)
  ((t > 20)) || { say "skipped $name: out of time"; return 1; }
  if ! timeout "$t" "$D" train --stage "$stage" "${CFG[@]}" "$@" >"$OUT/$name.log" 2>&1; then
    tail -20 "$OUT/$name.log"
    say "FAIL: $name (log: $OUT/$name.log)"
    return 1
  fi
  mv "$RUN/stage$stage" "$OUT/$name"
}

CPU=(--set train.device=cpu --set dist.backend=local)
# NAME:REFERENCE:RTOL_STAGE1:RTOL_STAGE2:FLAGS. Stage 1 (SURE) stays fp32 under train.precision=bf16, so its bf16
# run matches its fp32 run as closely as fp32 runs do.
if ((cpu_only)); then
  OTHER=("cpu-mpi:cpu:$RTOL_CPU:$RTOL_CPU:--set train.device=cpu --set dist.backend=mpi")
  if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
    OTHER+=("cpu-bf16:cpu:$RTOL_CPU:$RTOL_BF16:--set train.device=cpu --set dist.backend=local --set train.precision=bf16")
  fi
else
  OTHER=("cuda-fp32:cpu:$RTOL_FP32:$RTOL_FP32:--set train.device=cuda --set dist.backend=nccl --set train.precision=fp32"
         "cuda-bf16:cpu:$RTOL_FP32:$RTOL_BF16:--set train.device=cuda --set dist.backend=nccl --set train.precision=bf16"
         "cuda-bf16:cuda-fp32:$RTOL_FP32:$RTOL_BF16:")  # the same run against CUDA fp32: precision alone
fi
status=0
summary=()
compare() {  # STAGE NAME RTOL REFERENCE
  local f=$OUT/compare-s$1-$2-vs-$4.txt
  if python3 "$SRC/launch/compare_losses.py" "$OUT/s$1-$4/metrics.jsonl" "$OUT/s$1-$2/metrics.jsonl" \
      --steps "$STEPS" --rtol "$3" --label "stage $1, $2 vs $4" >"$f"; then :; else status=1; fi
  cat "$f"
  summary+=("$(tail -n 1 "$f")")
}

# ------------------------------------------------------------------------------------------------- compare
for stage in 1 2; do
  if [[ $stage == 2 ]]; then cp -r "$OUT/s1-cpu" "$RUN/stage1"; fi  # every stage-2 variant denoises with one DAE
  run_stage "s$stage-cpu" "$stage" "${CPU[@]}" || die "the CPU reference of stage $stage"
  for o in "${OTHER[@]}"; do
    IFS=: read -r name ref rtol1 rtol2 flags <<<"$o"
    rtol=$rtol1; [[ $stage == 2 ]] && rtol=$rtol2
    if [[ -z $flags ]]; then  # a comparison of two runs made above
      [[ -f $OUT/s$stage-$name/metrics.jsonl ]] && compare "$stage" "$name" "$rtol" "$ref"
      continue
    fi
    read -ra sets <<<"$flags"
    if run_stage "s$stage-$name" "$stage" "${sets[@]}"; then compare "$stage" "$name" "$rtol" "$ref"; else status=1; fi
  done
done

# ------------------------------------------------------------------------------------------------- speed
# Stage-2 tokens/s from metrics.jsonl (examples/s × tokens per row, median after 3 warm-up steps) and MFU: the
# step's counted matmul FLOPs (3 × forward, bench/entries.cpp's t5_forward_flops) against the device's peak.
report_speed() {  # NAME PRECISION (fp32 | bf16)
  python3 - "$OUT/$1/metrics.jsonl" "$2" "$1" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed -n 1p)" \
    "${SIZES[@]}" <<'PY'
import json, os, statistics, sys
path, amp, name, gpu = sys.argv[1:5]
dim, S, d, H, dk, ff, L, V, B = (float(x) for x in sys.argv[5:14])
rows = [json.loads(l) for l in open(path)]
rows = [r for r in rows if "examples_per_s" in r][3:] or [r for r in rows if "examples_per_s" in r]
tok = statistics.median(r["tokens"] for r in rows)           # tokens of the step's batch (1 rank, no accumulation)
eps = statistics.median(r["examples_per_s"] for r in rows)
T = tok / B                                                  # label positions a row
inner = H * dk
enc = 2 * B * S * d * inner * 4 + 2 * 2 * B * H * S * S * dk + 2 * 2 * B * S * d * ff
dec = (2 * B * T * d * inner * 4 + 2 * 2 * B * H * T * T * dk + 2 * B * T * d * inner * 2 + 2 * B * S * d * inner * 2
       + 2 * 2 * B * H * T * S * dk + 2 * 2 * B * T * d * ff)
flops = 3 * (2 * B * (dim * dim + dim * d * S) + L * enc + L * dec + 2 * tok * d * V)
rate = flops * eps / B
peaks = {"H200": (989e12, 67e12), "H100": (989e12, 67e12), "A100": (312e12, 19.5e12), "L40S": (362e12, 91.6e12)}
peak = next((p for k, p in peaks.items() if k in gpu), None)
env = os.environ.get("GPU_PEAK_TFLOPS_" + amp.upper())
peak = float(env) * 1e12 if env else (peak[0 if amp == "bf16" else 1] if peak else None)
mfu = "MFU %.1f %% of %.0f TFLOP/s (%s %s peak)" % (100 * rate / peak, peak / 1e12, gpu, amp) if peak else \
      "MFU n/a (no peak known for '%s'; set GPU_PEAK_TFLOPS_%s)" % (gpu or "this device", amp.upper())
print("stage-2 step %s: %.0f tokens/s, %.0f rows/s, %.2f TFLOP/s counted, %s" % (name, tok * eps / B, eps, rate / 1e12, mfu))
PY
}
if ((cpu_only)); then
  SIZES=(4 8 64 4 16 128 2 48 32)
  summary+=("$(report_speed s2-cpu-mpi fp32)")
else
  # Inverter of T5-base width for the speed figures (the comparison's toy model would only measure launch latency).
  SIZES=(4 16 768 12 64 3072 6 48 256)
  BIG=(--set inverter.d_model=768 --set inverter.d_kv=64 --set inverter.num_heads=12 --set inverter.d_ff=3072
       --set inverter.num_layers=6 --set inverter.num_decoder_layers=6 --set inverter.repeat_tokens=16
       --set stage2.batch_size=256 --set stage2.steps=30)
  for amp in fp32 bf16; do
    if (($(left) < 60)); then summary+=("stage-2 speed $amp: skipped, out of time"); continue; fi
    if run_stage "speed-$amp" 2 --set train.device=cuda --set dist.backend=nccl --set train.precision="$amp" "${BIG[@]}"; then
      summary+=("$(report_speed "speed-$amp" "$amp")")
    else
      status=1
    fi
  done
fi

say "summary (also in $OUT/summary.txt):"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
if ((status == 0)); then say "OK"; else say "FAIL: see the lines above"; fi
exit "$status"
