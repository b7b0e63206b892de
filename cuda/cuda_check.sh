#!/usr/bin/env bash
# cuda_check.sh - the one command for a GPU machine (`make cuda-check`).
#
#   1. builds the library, the chapters and build/.../cuda_validate with nvcc
#   2. runs cuda_validate: every kernel against the CPU reference (max |diff|,
#      PASS/FAIL), then benchmarks (tiled matmul vs cuBLAS at the model's
#      shapes, plain vs fused attention at lengths 64..1024, GB/s of the rest)
#   3. runs chapters 03-08 with --device cpu and with --device cuda and
#      compares every number they print (timings left out); chapters 03, 04,
#      05, 06 and 07 compute on the GPU with --device cuda and print
#      "GPU vs CPU: max |diff| = ..." (05, 07: "cuda vs CPU: ..."): each
#      such number must be <= GPU_TOL. Chapter 08 trains on the GPU with
#      --device cuda (the one model of common/model/model.c through the CUDA
#      backend); both devices draw the same dropout masks
#      (common/core/dropout_mask.h), so with dropout ON its loss curves
#      (loss.dat, every step) must agree within LOSS_TOL
#   4. trains chapter 08 at its defaults (600 steps) on the CPU and on the
#      GPU: time and exact-match accuracy of each; the GPU run must reach
#      TRAIN_MIN_ACC percent
#   5. times one training step of the copy-task Transformer (N=2, d_model
#      512, d_ff 2048, h 8, batch 80 x 10 tokens, vocab 11) on the CPU and
#      on the GPU (build/.../gpu_train_bench; the target: >= 20x faster)
#   6. writes one report, $OUT/cuda-check/report.txt, and prints it
#
# Without nvcc it says so and stops (exit 0); without a GPU it stops after the
# build (exit 0). Exit 1 when the build fails, a kernel disagrees with the CPU,
# or a chapter prints different numbers on the two devices.
#
# Settings (environment, or make variables: make cuda-check BUILD=build/x):
#   BUILD   build folder [build]          OUT   output folder [out]
#   REPS    timed runs per benchmark [10]
#   CHAPTER_TIMEOUT  seconds per chapter run [60]
#   GPU_TOL  largest "GPU vs CPU" difference a chapter may print [1e-3]
#   BENCH_ARGS  flags for gpu_train_bench [--cpu-steps 3 --gpu-steps 50]
#   CHAPTER_ARGS_08  flags for chapter 08 in step 3 [--steps 30 --eval 100]: short,
#                    because Adam amplifies rounding differences step by step
#                    (on the host shim the two curves are bit-identical)
#   LOSS_TOL  largest relative difference of chapter 08's per-step losses [1e-3]
#   TRAIN_ARGS_08  flags for chapter 08 in step 4 [none: its defaults]
#   TRAIN_TIMEOUT  seconds per run of step 4 [120]
#   TRAIN_MIN_ACC  exact-match percent the GPU run of step 4 must reach [90]
set -u
cd "$(dirname "$0")/.." || exit 1

BUILD=${BUILD:-build}
OUT=${OUT:-out}
REPS=${REPS:-10}
CHAPTER_TIMEOUT=${CHAPTER_TIMEOUT:-60}
GPU_TOL=${GPU_TOL:-1e-3}
BENCH_ARGS=${BENCH_ARGS:---cpu-steps 3 --gpu-steps 50}
CHAPTER_ARGS_08=${CHAPTER_ARGS_08:---steps 30 --eval 100}
LOSS_TOL=${LOSS_TOL:-1e-3}
TRAIN_ARGS_08=${TRAIN_ARGS_08:-}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-120}
TRAIN_MIN_ACC=${TRAIN_MIN_ACC:-90}
DIR=$OUT/cuda-check
REPORT=$DIR/report.txt
JOBS=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
mkdir -p "$DIR"

NVCC=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [ -z "$NVCC" ]; then
    echo "cuda-check: nvcc not found, so there is no CUDA build to check."
    echo "            (install the CUDA toolkit, or put its bin/ folder on PATH)"
    exit 0
fi

# ---- 1. build ------------------------------------------------------------------------
echo "== cuda-check: building in $BUILD (log: $DIR/build.log) =="
if ! make -j"$JOBS" BUILD="$BUILD" CUDA=1 all >"$DIR/build.log" 2>&1; then
    tail -n 30 "$DIR/build.log"
    echo "cuda-check: the build failed (full log: $DIR/build.log)"
    exit 1
fi
# The validator and the training benchmark have a main each, so they are
# not in libaiyn.a; a CUDA build of `make all` links them from cuda/tools/.
VALIDATE=$BUILD/cuda_validate
BENCH=$BUILD/gpu_train_bench
echo "built: library, chapters, $VALIDATE, $BENCH"

if ! "$VALIDATE" --probe >/dev/null; then
    echo "cuda-check: built with CUDA; no CUDA GPU found: skipping validation, benchmarks"
    echo "            and the chapter comparison (run this on a machine with an NVIDIA GPU)."
    exit 0
fi

# ---- 2. validate + benchmark ------------------------------------------------------------
status=0
echo "== cuda-check: validating and timing every kernel =="
timeout 240 "$VALIDATE" --out "$DIR" --reps "$REPS" >"$DIR/validate.log" 2>&1
vrc=$?
[ $vrc -ne 0 ] && status=1

# ---- 3. chapters: --device cpu vs --device cuda -------------------------------------------
# Every number a chapter prints, in order, except lines about time or speed
# (they differ run to run) and the device line itself.
numbers() {
    grep -viE 'time|[0-9.]+ ?(ms|s)\b|/s\b|second|elapsed|speed|device|cuda|cpu' "$1" |
        sed 's/\x1b\[[0-9;]*m//g' |
        grep -oE '[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(nan|inf)' || true
}
# Chapter 08 trains on the GPU: the two runs see the same batches, rates and
# dropout masks, so their losses must agree step for step (loss.dat: "step
# loss floor" per line) to float rounding.
compare_losses() {   # name -> one report line; returns 1 on a difference
    local name=$1 a=$DIR/chapters/cpu/$1/loss.dat b=$DIR/chapters/cuda/$1/loss.dat
    if ! grep -q '^device: cuda' "$DIR/chapters/$name.cuda.txt"; then
        printf '%-26s did NOT train on the GPU with --device cuda (no "device: cuda" line)\n' "$name"
        return 1
    fi
    if [ ! -f "$a" ] || [ ! -f "$b" ]; then
        printf '%-26s no loss.dat from one of the runs (%s, %s)\n' "$name" "$a" "$b"
        return 1
    fi
    paste "$a" "$b" | awk -v name="$name" -v tol="$LOSS_TOL" '
        /^#/ { next }
        NF == 6 && $1 == $4 { n++; d = $2 - $5; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; if (s < 1e-30) s = 1e-30
                              if (d / s > worst) { worst = d / s; at = $1 }
                              if ($2 !~ /^[-+0-9.eE]+$/ || $5 !~ /^[-+0-9.eE]+$/) bad = 1; next }
        { mismatch = 1 }
        END {
            if (mismatch || n == 0) { printf "%-26s DIFFERENT: the loss curves have different steps\n", name; exit 1 }
            if (bad) { printf "%-26s NaN/inf in a loss curve\n", name; exit 1 }
            ok = worst <= tol
            printf "%-26s %-9s loss at every one of %d steps (dropout on), max relative difference %.3g (step %d)%s\n",
                   name, ok ? "same" : "DIFFERENT", n, worst, at, ok ? "" : " > " tol
            exit ok ? 0 : 1
        }'
}
compare_chapter() {   # name -> one report line; returns 1 on a difference
    local name=$1 bin=$BUILD/$1 extra="" rc_cpu rc_gpu
    [ "$name" != "${name#08_}" ] && extra="$CHAPTER_ARGS_08"
    # shellcheck disable=SC2086
    NO_COLOR=1 timeout "$CHAPTER_TIMEOUT" "$bin" --device cpu --out "$DIR/chapters/cpu/$name" $extra \
        >"$DIR/chapters/$name.cpu.txt" 2>&1
    rc_cpu=$?
    # shellcheck disable=SC2086
    NO_COLOR=1 timeout "$CHAPTER_TIMEOUT" "$bin" --device cuda --out "$DIR/chapters/cuda/$name" $extra \
        >"$DIR/chapters/$name.cuda.txt" 2>&1
    rc_gpu=$?
    if [ $rc_cpu -eq 124 ] || [ $rc_gpu -eq 124 ]; then
        printf '%-26s timed out after %ss (set CHAPTER_TIMEOUT or CHAPTER_ARGS_08)\n' "$name" "$CHAPTER_TIMEOUT"
        return 1
    fi
    if [ $rc_cpu -eq 2 ] && grep -qi -- '--device' "$DIR/chapters/$name.cpu.txt"; then
        printf '%-26s does not take --device: not compared\n' "$name"
        return 0
    fi
    if [ $rc_cpu -ne 0 ] || [ $rc_gpu -ne 0 ]; then
        printf '%-26s exit status cpu %d, cuda %d (outputs in %s/chapters/)\n' "$name" $rc_cpu $rc_gpu "$DIR"
        return 1
    fi
    # chapters that compute on the GPU say how far it is from the CPU
    local gpu_note=""
    case $name in
    08_*)
        compare_losses "$name"
        return $?
        ;;
    03_*|04_*|05_*|06_*|07_*)
        local gpu_lines worst_gpu
        gpu_lines=$(sed 's/\x1b\[[0-9;]*m//g' "$DIR/chapters/$name.cuda.txt" | grep -E '(GPU|cuda) vs CPU: max \|diff\| =')
        if [ -z "$gpu_lines" ]; then
            printf '%-26s NO "GPU vs CPU" line with --device cuda (did it run on the GPU?)\n' "$name"
            return 1
        fi
        worst_gpu=$(printf '%s\n' "$gpu_lines" | sed 's/.*max |diff| =//; s/\[[^]]*\]//g' |
            grep -oE '[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|nan|inf' |
            awk 'BEGIN { w = 0 } { v = $1 + 0; if ($1 ~ /nan|inf/ || v > w) w = ($1 ~ /nan|inf/) ? 1e30 : v } END { print w }')
        gpu_note=$(awk -v w="$worst_gpu" -v t="$GPU_TOL" -v n="$(printf '%s\n' "$gpu_lines" | wc -l)" \
            'BEGIN { printf "; GPU vs CPU (%d lines): max %.3g %s", n, w, (w <= t ? "ok" : "ABOVE " t) }')
        if ! awk -v w="$worst_gpu" -v t="$GPU_TOL" 'BEGIN { exit !(w <= t) }'; then
            printf '%-26s GPU DIFFERS: max |gpu - cpu| %s > %s\n' "$name" "$worst_gpu" "$GPU_TOL"
            return 1
        fi
        ;;
    esac
    numbers "$DIR/chapters/$name.cpu.txt" >"$DIR/chapters/$name.cpu.num"
    numbers "$DIR/chapters/$name.cuda.txt" >"$DIR/chapters/$name.cuda.num"
    paste -d' ' "$DIR/chapters/$name.cpu.num" "$DIR/chapters/$name.cuda.num" | awk -v name="$name" -v note="$gpu_note" '
        NF == 2 { n++; d = $1 - $2; if (d < 0) d = -d; s = $1 < 0 ? -$1 : $1; if (s < 1) s = 1;
                  if (d / s > worst) worst = d / s }
        NF != 2 { mismatch = 1 }
        END {
            if (mismatch) { printf "%-26s DIFFERENT: the two runs print different amounts of numbers\n", name; exit 1 }
            verdict = worst <= 1e-3 ? "same" : "DIFFERENT"
            printf "%-26s %-9s %6d numbers, max relative difference %.3g%s\n", name, verdict, n, worst, note
            exit worst <= 1e-3 ? 0 : 1
        }'
}

mkdir -p "$DIR/chapters"
chapter_lines=""
n_chapters=0
for d in chapters/0[3-8]_*; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    if [ ! -x "$BUILD/$name" ]; then
        chapter_lines+=$(printf '%-26s not built' "$name")$'\n'
        continue
    fi
    echo "== cuda-check: $name, cpu vs cuda =="
    line=$(compare_chapter "$name") || status=1
    chapter_lines+="$line"$'\n'
    n_chapters=$((n_chapters + 1))
done

# ---- 4. chapter 08 at its defaults: training time and accuracy, CPU vs GPU ------------------
# one summary line per device: "<steps> steps in <s> s (<ms> ms/step), exact match <pct>%"
train_summary() {   # output file -> the line (or what went wrong)
    local f=$1 t a
    t=$(sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\) s: \([0-9.]*\) ms\/step.*/\1 steps in \2 s (\3 ms\/step)/p' "$f")
    a=$(sed -n 's/^exact match on [0-9]* held-out sequences[^:]*: \([0-9.]*\)%.*/\1/p' "$f")
    printf '%s, exact match %s%%' "${t:-no training summary}" "${a:-?}"
}
train_lines=""
if [ -x "$BUILD/08_training" ]; then
    echo "== cuda-check: chapter 08 at its defaults, cpu vs cuda =="
    mkdir -p "$DIR/train08"
    declare -A trc
    for dev in cpu cuda; do
        # shellcheck disable=SC2086
        NO_COLOR=1 timeout "$TRAIN_TIMEOUT" "$BUILD/08_training" --device $dev --out "$DIR/train08/$dev" \
            $TRAIN_ARGS_08 >"$DIR/train08/$dev.txt" 2>&1
        trc[$dev]=$?
    done
    ts() { sed -n 's/^trained [0-9]* steps in \([0-9.]*\) s.*/\1/p' "$DIR/train08/$1.txt"; }
    gpu_acc=$(sed -n 's/^exact match on [0-9]* held-out sequences[^:]*: \([0-9.]*\)%.*/\1/p' "$DIR/train08/cuda.txt")
    train_lines+=$(printf 'cpu:  %s  (exit %d)' "$(train_summary "$DIR/train08/cpu.txt")" "${trc[cpu]}")$'\n'
    train_lines+=$(printf 'cuda: %s  (exit %d)' "$(train_summary "$DIR/train08/cuda.txt")" "${trc[cuda]}")$'\n'
    cs=$(ts cpu); gs=$(ts cuda)
    if [ -n "$cs" ] && [ -n "$gs" ]; then
        train_lines+=$(awk -v c="$cs" -v g="$gs" 'BEGIN { printf "training on the GPU: %.1fx the CPU'"'"'s speed", (g > 0 ? c / g : 0) }')$'\n'
    fi
    if [ "${trc[cpu]}" -ne 0 ] || [ "${trc[cuda]}" -ne 0 ]; then
        train_lines+="FAIL: a run exited non-zero (124: timed out after ${TRAIN_TIMEOUT}s; 1: NaN stop)"$'\n'
        status=1
    elif ! grep -q '^device: cuda' "$DIR/train08/cuda.txt"; then
        train_lines+="FAIL: the --device cuda run did not train on the GPU"$'\n'
        status=1
    elif [ -n "$gpu_acc" ] && ! awk -v a="$gpu_acc" -v m="$TRAIN_MIN_ACC" 'BEGIN { exit !(a >= m) }'; then
        train_lines+="FAIL: the GPU run reached $gpu_acc% exact match, below $TRAIN_MIN_ACC%"$'\n'
        status=1
    fi
else
    train_lines="08_training not built"$'\n'
fi

# ---- 5. training step: CPU vs GPU --------------------------------------------------------
echo "== cuda-check: one training step, CPU vs GPU =="
# shellcheck disable=SC2086
timeout 150 "$BENCH" $BENCH_ARGS >"$DIR/train_bench.txt" 2>&1
brc=$?
[ $brc -ne 0 ] && status=1

# ---- 6. the report -------------------------------------------------------------------
{
    echo "attention-in-c: CUDA check, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
    echo "nvcc:    $("$NVCC" --version | tail -n 1)"
    echo "build:   $BUILD (make CUDA=1 all: libaiyn_cuda.so, opened by --device cuda; cuda_validate)"
    echo
    if [ -f "$DIR/validate.txt" ]; then
        cat "$DIR/validate.txt"
    else
        echo "cuda_validate wrote no report (exit status $vrc); its output:"
        tail -n 40 "$DIR/validate.log"
    fi
    [ $vrc -eq 124 ] && echo "cuda_validate TIMED OUT after 240 s"
    echo
    echo "== chapters 03-08: every printed number, --device cpu vs --device cuda =="
    echo "What is compared: each chapter runs twice, once with --device cpu and once with"
    echo "--device cuda, at its defaults, and every number it prints is compared in order"
    echo "(lines about time, speed or the device are left out; 'same' = relative difference"
    echo "<= 1e-3: printed numbers are rounded, and the GPU adds in another order). Chapters"
    echo "03, 04, 05, 06, 07 compute on the GPU with --device cuda (the library op or, in 07,"
    echo "the whole model: common/model/model.c through the CUDA backend) and print '... vs CPU:"
    echo "max |diff| = ...' lines, which must all be <= $GPU_TOL. 08 trains on the GPU with the"
    echo "CPU's dropout masks (one counter-based generator), $CHAPTER_ARGS_08, dropout on,"
    echo "and the loss of every step must agree within a relative $LOSS_TOL."
    if [ $n_chapters -eq 0 ] && [ -z "$chapter_lines" ]; then
        echo "(no chapters 03-08 found)"
    else
        printf '%s' "$chapter_lines"
    fi
    echo "(outputs of both runs: $DIR/chapters/)"
    echo
    echo "== chapter 08 at its defaults${TRAIN_ARGS_08:+ ($TRAIN_ARGS_08)}: train, then exact match on held-out sequences =="
    echo "(the same masks on both devices, so the curves differ only by float rounding, which"
    echo " Adam amplifies over 600 steps; the GPU run must reach $TRAIN_MIN_ACC% exact match;"
    echo " outputs in $DIR/train08/)"
    printf '%s' "$train_lines"
    echo
    echo "== one training step of the copy task, CPU vs GPU (Annotated Transformer's config) =="
    cat "$DIR/train_bench.txt"
    [ $brc -eq 124 ] && echo "gpu_train_bench TIMED OUT after 150 s"
    [ $brc -ne 0 ] && [ $brc -ne 124 ] && echo "gpu_train_bench: exit status $brc (1: below the target or a NaN step)"
    echo
    echo "total: $(( $(date +%s) - t0 )) s; result: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
} >"$REPORT"

echo
cat "$REPORT"
echo
echo "report: $REPORT"
exit $status
