#!/usr/bin/env bash
# A kvbench report in a real browser: two smoke runs, a gate, `kvbench report`, then headless
# Chromium loads the page. Its DOM after the page's own script ran must hold every section and
# a non-zero rendered size for every plot; Chromium must log no console message; its
# screenshot must not be blank. At 700 and 1280 px, that page, a verdict with long names and a
# sweep's Pareto and cross-SoC charts must neither overflow, nor wrap text inside a number or a
# heading's word, nor set any plot's text over another's or past its edge (the page's script
# measures each in the browser: bounding boxes). Where Chromium is missing or cannot start, the test is skipped
# (exit 77, CTest's SKIP_RETURN_CODE) and says why.
set -euo pipefail

kvbench=$1
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIPPED: chromium not found on PATH: the report was not checked in a browser (ci/install-deps.sh installs Debian's chromium)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$kvbench" run --suite smoke --db "$work/results.sqlite" --json > /dev/null
"$kvbench" run --suite smoke --db "$work/results.sqlite" --json > /dev/null
# The page is under test, not this machine's timings: a verdict of pass, regressed (1) or
# unreliable (5) is a page to render; anything else is a failure.
gate=0
"$kvbench" gate --baseline 1 --candidate 2 --db "$work/results.sqlite" > /dev/null || gate=$?
case $gate in
  0|1|5) ;;
  *) echo "FAILED: kvbench gate exited $gate"; exit 1 ;;
esac
"$kvbench" report --db "$work/results.sqlite" --out "$work/report"

# A verdict with rows, long case names and a configuration change, for the layout at 700 and
# 1280 px: a tighter budget regresses exact rows.
wide_suite() {
  cat <<JSON
{"name": "wide", "repetitions": 1, "warmup": 0,
 "models": [{"name": "a-synthetic-model-with-a-long-name", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
 "workloads": [{"name": "retrieval-augmented-generation-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 8}],
 "policies": [{"name": "int4-keys-and-values-hybrid-selection", "k": "q4", "v": "q4",
               "sparse": {"selector": "hybrid", "window": 64, "budget": $1, "sample_every": 4}}]}
JSON
}
wide_suite 0.5 > "$work/wide-base.json"
wide_suite 0.15 > "$work/wide-tight.json"
"$kvbench" run --suite "$work/wide-base.json" --db "$work/wide.sqlite" --json > /dev/null
"$kvbench" run --suite "$work/wide-tight.json" --db "$work/wide.sqlite" --json > /dev/null
gate=0
"$kvbench" gate --baseline 1 --candidate 2 --db "$work/wide.sqlite" > /dev/null || gate=$?
if [ "$gate" != 1 ]; then echo "FAILED: the tighter budget should regress (gate exit $gate, expected 1)"; exit 1; fi
"$kvbench" report --db "$work/wide.sqlite" --out "$work/wide-report"
# A sweep: the Pareto fronts and the bar charts across SoCs.
"$kvbench" sweep --suite smoke --socs host,snapdragon-8-gen-3,apple-a17-pro,raspberry-pi-5 --repetitions 1 --db "$work/sweep.sqlite" --json > /dev/null
"$kvbench" report --db "$work/sweep.sqlite" --out "$work/sweep-report"

flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run
       --user-data-dir="$work/profile" --enable-logging=stderr --v=0)
url="file://$work/report/index.html"
if ! timeout 120 "$browser" "${flags[@]}" --dump-dom "$url#measure" > "$work/dom.html" 2> "$work/dom.log"; then
  echo "SKIPPED: $browser could not run here:"
  tail -5 "$work/dom.log"
  exit 77
fi
timeout 120 "$browser" "${flags[@]}" --window-size=1280,1000 --screenshot="$work/shot.png" "$url" > /dev/null 2> "$work/shot.log"
for page in report wide-report sweep-report; do
  for width in 700 1280; do
    timeout 120 "$browser" "${flags[@]}" --window-size=$width,1000 --dump-dom "file://$work/$page/index.html#measure" \
      > "$work/$page-$width.html" 2> "$work/$page-$width.log"
  done
done

python3 - "$work" <<'PY'
import re, struct, sys, zlib
work = sys.argv[1]
page = open(f"{work}/report/index.html", encoding="utf-8").read()
dom = open(f"{work}/dom.html", encoding="utf-8").read()
failures = []
if 'data-measured="yes"' not in dom:
    failures.append("the page's script did not run (no data-measured on body)")
for section in ["verdict", "headline", "trends", "cases", "sparse-quality", "pareto", "cross-soc", "metadata"]:
    if f'id="{section}"' not in dom:
        failures.append(f"section {section} missing from the DOM")
# The headline: both TTFTs of a multi-request case (the smoke suite's codebase case), each a figure.
headline = re.search(r'<section id="headline">(.*?)</section>', dom, re.S)
if not headline:
    failures.append("no headline section")
else:
    h = headline.group(1)
    for metric in ("ttft_first_request_ms", "ttft_followup_ms_p50"):
        if f'title="{metric}"' not in h:
            failures.append(f"the headline has no {metric} column")
    heads = re.findall(r'<th(?=[\s>])[^>]*?(?: title="([^"]*)")?>', h)
    rows = []
    for tr in re.findall(r'<tr><td><a [^>]*>(.*?)</a></td>(.*?)</tr>', h, re.S):
        label = re.sub(r'<wbr/?>', '', tr[0])
        cells = ["case"] + re.findall(r'<td[^>]*>([^<]*)</td>', tr[1])
        if "codebase" in label and len(cells) == len(heads):
            rows.append((label, cells[heads.index("ttft_first_request_ms")], cells[heads.index("ttft_followup_ms_p50")]))
    if not rows:
        failures.append("the headline has no codebase row")
    for label, first, followup in rows:
        if first in ("", "-") or followup in ("", "-"):
            failures.append(f"headline {label}: first request {first!r}, follow-ups {followup!r}")
svgs = page.count("<svg")
sizes = re.findall(r'<svg[^>]*data-rendered="(\d+)x(\d+)"', dom)
if svgs == 0:
    failures.append("the page has no plots")
if len(sizes) != svgs:
    failures.append(f"{svgs} plots in the page, {len(sizes)} measured in the browser")
zero = [s for s in sizes if int(s[0]) == 0 or int(s[1]) == 0]
if zero:
    failures.append(f"{len(zero)} plots rendered with a zero size")
# Each page at a narrow and a wide window: nothing sticks out, no number or heading word is
# split over two lines, no plot text covers another or is cut off.
import html as entities
for name in ("report", "wide-report", "sweep-report"):
    for width in (700, 1280):
        dom_w = open(f"{work}/{name}-{width}.html", encoding="utf-8").read()
        for attribute, what in (("data-overflow", "it overflows"), ("data-wrapped", "text wraps inside"),
                                ("data-overlaps", "plot text overlaps or is cut off")):
            m = re.search(attribute + r'="([^"]*)"', dom_w)
            if not m:
                failures.append(f"{name} at {width} px: the page's script did not measure {attribute}")
            elif m.group(1) != "none":
                failures.append(f"{name} at {width} px: {what}: {entities.unescape(m.group(1))}")
        if name == "wide-report" and ("<strong>What changed</strong>" not in dom_w or 'class="rows verdict-rows"' not in dom_w):
            failures.append(f"{name} at {width} px: the verdict lacks its changes or its rows")
        if name == "sweep-report" and ("Pareto front" not in dom_w or "per SoC (model clock)" not in dom_w):
            failures.append(f"{name} at {width} px: no Pareto front or cross-SoC chart to measure")
for log in ["dom.log", "shot.log"] + [f"{n}-{w}.log" for n in ("report", "wide-report", "sweep-report") for w in (700, 1280)]:
    for line in open(f"{work}/{log}", encoding="utf-8", errors="replace"):
        if ":CONSOLE(" in line or "Uncaught" in line:
            failures.append("console: " + line.strip())
# The screenshot: a PNG whose pixels are not all one colour.
png = open(f"{work}/shot.png", "rb").read()
if png[:8] != b"\x89PNG\r\n\x1a\n":
    failures.append("the screenshot is not a PNG")
else:
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    pixels = zlib.decompress(idat)
    row = len(pixels) // height
    distinct = set()
    for y in range(0, height, 7):
        line = pixels[y * row + 1:(y + 1) * row]
        distinct.update(line[i:i + 3] for i in range(0, len(line), 3 * 11))
    if len(distinct) < 8:
        failures.append(f"the screenshot looks blank ({len(distinct)} distinct colours sampled)")
if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"report checked in Chromium: {svgs} plots rendered with non-zero sizes, every section present, no console messages, "
      f"screenshot {width}x{height} not blank; at 700 and 1280 px three pages with no overflow, no number or heading wrapped "
      f"inside, no plot text overlapping or cut off")
PY
