#!/usr/bin/env bash
# The sweep's HTML page in a real headless Chromium, with no network: it
# loads, its charts are SVG elements in the rendered DOM, it states a
# recommendation, and a full-page screenshot is taken.
# Usage: html_in_chromium_test.sh BINARY SPEC [KEEP_DIR] [MIN_CHARTS]
# KEEP_DIR (or $LEASEPROOF_SCREENSHOT_DIR) keeps sweep.png and sweep.html;
# MIN_CHARTS: the SVG elements the page must have (default 4: a lease sweep's
# three charts and its timeline; a registry sweep draws 2).
set -euo pipefail
bin=$1
spec=$2
keep=${3:-${LEASEPROOF_SCREENSHOT_DIR:-}}
min_charts=${4:-4}
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v chromium >/dev/null || fail "chromium is not installed (scripts/setup.sh tests installs it)"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" sweep --spec "$spec" --seeds 2 --out "$dir/report" >"$dir/sweep.log" || fail "sweep exited $?: $(tail -5 "$dir/sweep.log")"
page="file://$dir/report/sweep.html"
# No sandbox (CI runs as root); every host name resolves to nothing, so a page
# that needed the network would show it.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions
       --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$dir/profile")

timeout 120 chromium "${flags[@]}" --dump-dom "$page" >"$dir/dom.html" 2>"$dir/chromium.log" \
  || fail "chromium --dump-dom exited $?: $(tail -3 "$dir/chromium.log")"
svgs=$(grep -o '<svg' "$dir/dom.html" | wc -l)
((svgs >= min_charts)) || fail "the rendered page has $svgs SVG charts, expected at least $min_charts"
grep -qi 'recommendation' "$dir/dom.html" || fail "the rendered page states no recommendation"
grep -Eq '(src|href)="https?://' "$dir/dom.html" && fail "the page loads something from the network"

timeout 120 chromium "${flags[@]}" --screenshot="$dir/sweep.png" --window-size=1280,3000 --hide-scrollbars "$page" \
  >>"$dir/chromium.log" 2>&1 || fail "chromium --screenshot exited $?"
[[ -s "$dir/sweep.png" ]] || fail "no screenshot"
magic=$(head -c 8 "$dir/sweep.png" | od -An -tx1 | tr -d ' \n')
[[ $magic == 89504e470d0a1a0a ]] || fail "the screenshot is not a PNG"
bytes=$(stat -c %s "$dir/sweep.png")
((bytes > 20000)) || fail "the screenshot is $bytes bytes: a blank page?"
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  cp "$dir/sweep.png" "$dir/report/sweep.html" "$keep/"
fi
echo "ok: $svgs SVG charts rendered, screenshot $bytes bytes${keep:+, kept in $keep}"
