#!/bin/sh
# test-arm64.sh - the library and the Check suites built for arm64 (the
# instruction set of Apple Silicon and of most phones and single-board
# computers) and run under qemu-user, on a Debian x86-64 machine: what
# `make test-arm64` runs.
#
#   sh tools/test-arm64.sh                 the default suites (SUITES_DEFAULT below)
#   sh tools/test-arm64.sh gemm model      only these
#   BUILD_ARM64=build/arm64 JOBS=2         where to build, how many compiles at once
#
# On arm64 there is no AVX2 or AVX-512, so every #if __AVX512F__ / __AVX2__
# in common/fast/ takes its plain-C branch: this is the run that shows those
# branches compile and give the numbers the tests ask for. On an arm64 Linux
# machine itself the script builds with the native gcc and runs the suites
# directly.
#
# What it needs (Debian; installed when we are root or have passwordless
# sudo, else it prints the commands and exits 1):
#   gcc-aarch64-linux-gnu   the cross compiler (its libgomp: OpenMP)
#   qemu-user               qemu-aarch64, which runs arm64 programs here
#   check:arm64 libsubunit-dev:arm64 libgomp1:arm64
#                           Check and the runtime, from Debian's arm64 archive
#                           (multiarch: dpkg --add-architecture arm64)
#
# Why `qemu-aarch64 -L /` and not `-L /usr/aarch64-linux-gnu` (the cross
# toolchain's own libraries): check:arm64 brings Debian's arm64 libc
# (libc6:arm64), a later build of glibc than the cross toolchain's
# (libc6-arm64-cross). With -L /usr/aarch64-linux-gnu qemu loads the cross
# toolchain's ld.so, which then finds the multiarch libc.so.6 first; the two
# disagree on ld.so's private data, and fork() never returns in the child
# (it walks a list of thread stacks forever). Check runs every test in a
# forked child, so every suite hung. Here everything at run time (ld.so,
# libc, libgomp, libsubunit) comes from the multiarch packages.
#
# The suites: every one that needs neither the chapter programs (running
# an arm64 program from inside the tests needs binfmt_misc, which a
# container often lacks) nor x86-only expectations. Left out:
#   build docs lecture translation variations io train dist: run chapter
#     programs or make;
#   decode: several minutes under qemu (a beam search of 400 steps).
# (cuda runs: with no GPU it checks the backend table through the host
# shim, build/arm64/libaiyn_cuda_shim.so, built here for it.)
# Any of them can be named on the command line.
set -u
cd "$(dirname "$0")/.." || exit 1

SUITES_DEFAULT="tensor ops nn attention gemm model checkpoint bpe
                batch_file bleu cli corpus cuda dropout layout multihead optim parallel posenc qkv_file safetensors show table1"
BUILD=${BUILD_ARM64:-build/arm64}
JOBS=${JOBS:-2}
suites=${*:-$SUITES_DEFAULT}
export DEBIAN_FRONTEND=noninteractive

# ---- where we are: cross (x86-64 + qemu) or native arm64 ----------------------
if [ "$(uname -m)" = aarch64 ] || [ "$(uname -m)" = arm64 ]; then
    native=1
    cc=${CC:-gcc}
else
    native=0
    cc=aarch64-linux-gnu-gcc
fi
multiarch=/usr/lib/aarch64-linux-gnu

# ---- what is missing, and installing it ---------------------------------------
pkgs=""
if [ $native = 0 ]; then
    command -v "$cc" >/dev/null 2>&1 || pkgs="$pkgs gcc-aarch64-linux-gnu"
    qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static)
    [ -n "$qemu" ] || pkgs="$pkgs qemu-user"
    [ -r $multiarch/pkgconfig/check.pc ] || pkgs="$pkgs check:arm64"
    [ -r $multiarch/pkgconfig/libsubunit.pc ] || pkgs="$pkgs libsubunit-dev:arm64"
    [ -r $multiarch/libgomp.so.1 ] || pkgs="$pkgs libgomp1:arm64"
else
    pkg-config --exists check 2>/dev/null || pkgs="$pkgs check libsubunit-dev"
fi
command -v pkg-config >/dev/null 2>&1 || pkgs="$pkgs pkg-config"

if [ -n "$pkgs" ]; then
    add_arch=""
    if [ $native = 0 ] && ! dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64; then
        add_arch=1
    fi
    if [ "$(id -u)" = 0 ]; then
        sudo=""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo"
    else
        echo "test-arm64: missing$pkgs. Install them with:"
        [ -n "$add_arch" ] && echo "    sudo dpkg --add-architecture arm64"
        echo "    sudo apt-get update && sudo apt-get install -y$pkgs"
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "test-arm64: missing$pkgs, and this is not a Debian-like system (no apt-get)."
        exit 1
    fi
    echo "test-arm64: installing$pkgs"
    [ -n "$add_arch" ] && { $sudo dpkg --add-architecture arm64 || exit 1; }
    $sudo apt-get update -qq >/dev/null || { echo "test-arm64: apt-get update failed"; exit 1; }
    # shellcheck disable=SC2086
    $sudo apt-get install -y -qq $pkgs >/dev/null || {
        echo "test-arm64: could not install$pkgs (apt-get install -y$pkgs)"
        exit 1
    }
    qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static)
fi

# ---- build ---------------------------------------------------------------------
# PORTABLE=1: no -march=native (the x86 host's flags mean nothing to arm64);
# CUDA=0 MPI=0: no nvcc or mpicc for arm64 here. pkg-config must find the
# arm64 check.pc (its -L points at the arm64 libraries), never the host's.
start=$(date +%s)
if [ $native = 0 ]; then
    export PKG_CONFIG_LIBDIR=$multiarch/pkgconfig:/usr/share/pkgconfig
    run="$qemu -L /"
else
    run=""
fi
echo "test-arm64: building $BUILD/check_all with $cc"
if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" CC="$cc" PORTABLE=1 CUDA=0 MPI=0 \
        "$BUILD/check_all" "$BUILD/libaiyn_cuda_shim.so"; then
    echo "test-arm64: the arm64 build failed"
    exit 1
fi
built=$(date +%s)

# ---- run each suite ------------------------------------------------------------
# Check's per-test timeouts stretched (qemu runs arm64 code 5-20x slower
# than the host would run it natively); no test judges by time.
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-20}"
pass=""
fail=""
summary=""
for s in $suites; do
    t0=$(date +%s)
    log=$BUILD/test-$s.log
    echo "test-arm64: suite $s"
    # shellcheck disable=SC2086
    CK_RUN_SUITE=$s BUILD_DIR=$BUILD $run "$BUILD/check_all" >"$log" 2>&1
    rc=$?
    t=$(($(date +%s) - t0))
    checks=$(grep -E '^[0-9]+%: Checks:' "$log" | tail -n 1)
    if [ $rc = 0 ] && [ -n "$checks" ]; then
        pass="$pass $s"
        summary="$summary$(printf '  PASS  %-12s %4ss  %s' "$s" "$t" "$checks")
"
    else
        fail="$fail $s"
        summary="$summary$(printf '  FAIL  %-12s %4ss  %s (exit %s; %s)' "$s" "$t" "${checks:-no result}" "$rc" "$log")
"
        grep -E ':[FE]:' "$log" | head -n 5 | sed 's/^/          /'
    fi
done
end=$(date +%s)

echo
echo "test-arm64: arm64 ($cc${run:+, under $(basename "$qemu")}): build $((built - start))s, suites $((end - built))s"
printf '%s' "$summary"
if [ -n "$fail" ]; then
    echo "test-arm64: FAILED:$fail (logs: $BUILD/test-<suite>.log)"
    exit 1
fi
echo "test-arm64: all $(echo "$pass" | wc -w) suites passed"
