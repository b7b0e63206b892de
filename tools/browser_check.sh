#!/bin/sh
# browser_check.sh - open a line-view page (attention_lines.html, written by
# common/io/lineview.c) in a real headless browser and check what its script
# drew.
#
#   tools/browser_check.sh PAGE.html OUTDIR 'layer=1&head=2&query=all' ...
#
# For the n-th view (a URL hash, as the page documents it) it writes
#   OUTDIR/dom_n.html   the page's DOM after the script ran (--dump-dom)
#   OUTDIR/shot_n.png   a screenshot (--screenshot), to look at
# and checks that the view <svg id="view"> holds lines, all of them from the
# hash's layer and head (every head for head=all) and, for a query number,
# from that query alone. tests/check_lineview.c runs it and compares each
# line's stroke-opacity with the weights it wrote.
#
# Exit 0: every view checked; 1: a view is wrong or the browser failed;
# 2: bad arguments; 77: no browser (Debian: apt-get install chromium), skipped.
# CHROMIUM=/path/to/browser picks the browser.
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 PAGE.html OUTDIR HASH [HASH...]   (HASH e.g. 'layer=1&head=2&query=all')" >&2
    exit 2
fi
page=$1 out=$2
shift 2
[ -f "$page" ] || { echo "browser_check: no page '$page'" >&2; exit 2; }
browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
    done
fi
if [ -z "$browser" ]; then
    echo "browser_check: no chromium found (Debian: apt-get install chromium); browser checks skipped"
    exit 77
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
profile=$(mktemp -d "${TMPDIR:-/tmp}/browser_check_XXXXXX") || exit 1
trap 'rm -rf "$profile"' EXIT

# one headless run; its own throwaway profile, nothing from the network
browse() {
    timeout 90 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
        --user-data-dir="$profile" "$@" 2>/dev/null
}

# the value of key in hash ("" when absent)
field() { printf '%s\n' "$2" | tr '&' '\n' | sed -n "s/^$1=//p" | head -n 1; }

n=0
bad=0
for hash in "$@"; do
    n=$((n + 1))
    dom="$out/dom_$n.html" shot="$out/shot_$n.png"
    if ! browse --dump-dom "$url#$hash" >"$dom" || [ ! -s "$dom" ]; then
        echo "browser_check: $browser could not load $url#$hash"
        bad=1
        continue
    fi
    browse --window-size=1100,900 --screenshot="$shot" "$url#$hash" >/dev/null
    [ -s "$shot" ] || { echo "browser_check: no screenshot $shot"; bad=1; }
    # the lines inside <svg id="view">...</svg>, one a line
    awk 'BEGIN { RS = "</svg>" } /<svg id="view"/ { sub(/.*<svg id="view"/, ""); print }' "$dom" |
        grep -o '<line [^>]*>' >"$out/lines_$n.txt"
    lines=$(wc -l <"$out/lines_$n.txt")
    layer=$(field layer "$hash") head=$(field head "$hash") query=$(field query "$hash")
    layers=$(grep -o 'data-layer="[0-9]*"' "$out/lines_$n.txt" | sort -u | tr -dc '0-9 \n' | tr '\n' ' ')
    heads=$(grep -o 'data-head="[0-9]*"' "$out/lines_$n.txt" | sort -u | wc -l)
    other_head=$(grep -v "data-head=\"$head\"" "$out/lines_$n.txt" | wc -l)
    other_query=$(grep -v "data-q=\"$query\"" "$out/lines_$n.txt" | wc -l)
    msg="view $n (#$hash): $lines lines"
    if [ "$lines" -eq 0 ]; then msg="$msg: none drawn"; bad=1
    elif [ -n "$layer" ] && [ "$(echo $layers)" != "$layer" ]; then
        msg="$msg from layers $layers, not $layer"; bad=1
    elif [ -n "$head" ] && [ "$head" != all ] && [ "$other_head" -ne 0 ]; then
        msg="$msg, $other_head of them not from head $head"; bad=1
    elif [ -n "$query" ] && [ "$query" != all ] && [ "$other_query" -ne 0 ]; then
        msg="$msg, $other_query of them not from query $query"; bad=1
    else
        msg="$msg, all from layer ${layer:-?}, $( [ "$head" = all ] && echo "$heads heads" || echo "head $head" ), query ${query:-?}; $shot"
    fi
    echo "browser_check: $msg"
done
exit $bad
