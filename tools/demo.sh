#!/bin/sh
# demo.sh - lecture mode: every chapter in order, each with --pause (wait for
# Enter before each numbered section), then a two-line recap and the name of
# the next chapter. Before a chapter that trains for a while it says why the
# screen will stay still (wait_note). On a terminal it also waits before the
# next chapter; with stdin not a terminal (make demo </dev/null, CI) it runs
# straight through.
#
#   sh tools/demo.sh [BUILD_DIR] [OUT_DIR]      (what `make demo` runs)
#   DEMO_FLAGS="--no-color" sh tools/demo.sh    extra flags for every chapter
#   DEMO_QUICK=1 sh tools/demo.sh               a chapter whose --help lists
#                                               --quick runs with it (CI)
set -u
build=${1:-build}
out=${2:-out/demo}
recaps=$(dirname "$0")/demo_recaps.txt

# Before a chapter that computes for a while before its next section can
# show anything: what it is doing, so a still screen is not taken for a hang.
# The times are chapter 08's and 11's defaults measured on 2 cores
# (README.md, "Measured here"); with --quick (DEMO_QUICK=1) only the work
# is named.
wait_note() {
    case $1 in
    08_training) [ -n "$2" ] && t="" || t=" (about 15-30 s on 2 cores)"
        echo "(08_training trains a small Transformer to copy sequences before its later sections can"
        echo " show what it learned: the screen stays still while it trains$t)" ;;
    11_translation) [ -n "$2" ] && t="" || t=" (about 1-2 minutes on 2 cores)"
        echo "(11_translation generates a corpus, learns BPE and trains a translation model before it can"
        echo " evaluate and show attention: sections 4 and 5 take the longest$t)" ;;
    12_variations)
        echo "(12_variations trains one model per row of Table 3 before it can compare them: a still"
        echo " screen while each trains)" ;;
    esac
}

chapters=$(cd chapters && ls -d [0-9][0-9]_* | sort)
n=$(echo "$chapters" | wc -l)
i=0
for c in $chapters; do
    i=$((i + 1))
    if [ ! -x "$build/$c" ]; then
        echo "demo: $build/$c is not built (run make first)" >&2
        exit 1
    fi
    echo
    echo "################ chapter $i of $n: $c ################"
    # DEMO_QUICK=1: the chapter's own short run, where it has one
    own=
    if [ -n "${DEMO_QUICK:-}" ] && "$build/$c" --help | grep -q -- '--quick'; then own=--quick; fi
    wait_note "$c" "$own"
    # shellcheck disable=SC2086
    "$build/$c" --pause --out "$out/$c" $own ${DEMO_FLAGS:-} || { echo "demo: $c failed" >&2; exit 1; }
    echo
    echo "---- recap of $c ----"
    lines=$(grep "^$c |" "$recaps" | sed 's/^[^|]*| //')
    # two lines (none: a missing recap), each indented by 2 within a 100-column terminal
    long=$(echo "$lines" | awk 'length($0) > 98 { print length($0) }' | head -1)
    if [ -z "$lines" ] || [ "$(echo "$lines" | wc -l)" != 2 ] || [ -n "$long" ]; then
        echo "demo: the recap of $c in $recaps must be 2 lines of at most 98 characters" >&2
        exit 1
    fi
    echo "$lines" | sed 's/^/  /'
    next=$(echo "$chapters" | sed -n "$((i + 1))p")
    if [ -n "$next" ]; then
        echo "  Next: $next"
        if [ -t 0 ]; then
            printf '%s' "-- Enter: chapter $next --" >&2
            read -r _ || true
        fi
    else
        echo "  End of the demo: $n chapters. Plots and data are in $out/."
    fi
done
