#!/usr/bin/env bash
# The README's main command: one demo night, start to finish, on a fresh Debian machine.
#   1. installs what is missing (deploy/install-deps.sh) and builds the `nightjar` program
#   2. sets up the two models: the trained triage model, copied from examples/triage/model
#      into build/demo-model (a small K3-shaped model trained to classify support tickets:
#      KDA + MLA layers, 8 MXFP4 experts top-2; examples/triage/training/README.md), and a
#      random one for the stories, generated once into build/stories-model (K3-shaped, 16
#      MXFP4 experts top-2, random weights: its stories are noise)
#   3. submits the two example jobs into a fresh home (build/demo-home): ticket
#      classification (examples/triage) and story generation (examples/stories)
#   4. runs the queue to the end, then prints the results and the morning report;
#      the HTML report is written to build/demo-home/report.html
# Run it again to replay the night from scratch (the home is recreated, the triage model copied
# again; the random stories model is kept).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "dependencies"
deploy/install-deps.sh
step "build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target nightjar
nj=build/runner/nightjar

step "models"
# The trained triage model: copied every time, so the copy is always the committed one.
rm -rf build/demo-model.partial build/demo-model
cp -r examples/triage/model build/demo-model.partial
mv build/demo-model.partial build/demo-model
echo "build/demo-model: the trained triage model (examples/triage/model)"
stories=build/stories-model
if [ ! -f "$stories/config.json" ]; then
  rm -rf "$stories.partial"
  /usr/bin/python3 tests/reference/make_model.py --out "$stories.partial" --preset demo
  mv "$stories.partial" "$stories"
fi
echo "$stories: random weights (generated once)"

home=build/demo-home
rm -rf "$home"
export NIGHTJAR_HOME=$home

step "submit"
triage=$($nj submit examples/triage/triage.yaml)
stories=$($nj submit examples/stories/stories.yaml)
echo "triage job $triage, stories job $stories"

step "run (the night)"
started=$(date +%s)
$nj run --drain
echo "the queue ran in $(($(date +%s) - started)) s"

step "results: triage"
$nj results "$triage" --format csv
step "results: stories"
$nj results "$stories" --format jsonl |
  /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    text = " ".join((r.get("output_text") or "").split())
    print("%-12s %-6s %4d tokens  %s" % (r["custom_id"], r["status"], r["output_tokens"], text[:90]))'

step "morning report"
$nj report --out "$home/report.html"
echo
echo "HTML report: $home/report.html"
