#!/usr/bin/env bash
# The README's main command: one demo night, start to finish, on a fresh Debian machine.
#   1. installs what is missing (deploy/install-deps.sh) and builds the `nightjar` program
#   2. sets up the two trained models, copied from the repository: the triage model
#      (examples/triage/model -> build/demo-model: a small K3-shaped model trained to classify
#      support tickets; examples/triage/training/README.md) and the story model
#      (examples/stories/model -> build/stories-model: a K3-shaped model trained on generated
#      children's stories; examples/stories/training/README.md). Both: KDA + MLA layers,
#      8 MXFP4 experts top-2
#   3. submits the two example jobs into a fresh home (build/demo-home): ticket
#      classification (examples/triage) and story generation (examples/stories)
#   4. runs the queue, stops the run (SIGTERM, as a deadline or `systemctl stop` would) once
#      the stories are about a third written, and runs it again: the stories resume from
#      their checkpoints (tests/cli/test_stories_model.py checks that a resumed story is the
#      one an uninterrupted run writes)
#   5. prints the results, the stories in full, and the morning report; the HTML report is
#      written to build/demo-home/report.html
# Run it again to replay the night from scratch (the home is recreated, the models copied
# again).
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
rm -rf build/stories-model.partial build/stories-model
cp -r examples/stories/model build/stories-model.partial
mv build/stories-model.partial build/stories-model
echo "build/stories-model: the trained story model (examples/stories/model)"

home=build/demo-home
rm -rf "$home"
export NIGHTJAR_HOME=$home

step "submit"
triage=$($nj submit examples/triage/triage.yaml)
stories=$($nj submit examples/stories/stories.yaml)
echo "triage job $triage, stories job $stories"

# stories_json FIELD: the stories job's FIELD (tokens_done, tokens_planned, state) from
# `nightjar status JOB --output json`.
stories_json() {
  $nj status "$stories" --output json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["job"][sys.argv[1]])' "$1"
}

step "run (the night), stopped while the stories are being written, then run again"
started=$(date +%s)
$nj run --drain --commit-tokens 8 &
run_pid=$!
# Stop the run (SIGTERM, as a deadline or `systemctl stop` would) once a quarter of the
# stories' planned tokens are stored: read from the store (SQLite, WAL: a reader never blocks
# the run) every 20 ms, since the four stories take only seconds.
/usr/bin/python3 - "$home/nightjar.db" "$stories" "$(stories_json tokens_planned)" "$run_pid" <<'PY'
import os, signal, sqlite3, sys, time
db, job, planned, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break                                      # the run ended first
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
    done = con.execute("SELECT coalesce(sum(tokens_done), 0) FROM items WHERE job_id = ?", (job,)).fetchone()[0]
    con.close()
    if done >= planned // 4:
        os.kill(pid, signal.SIGTERM)
        break
    time.sleep(0.02)
PY
wait "$run_pid"
if [ "$(stories_json state)" = done ]; then
  echo "== the stories finished before the stop: nothing to resume this time"
else
  echo "== stopped the run (SIGTERM) with $(stories_json tokens_done) story tokens stored" \
    "(every story checkpointed where it stood); running it again, the stories resume:"
  $nj run --drain
fi
echo "the queue ran in $(($(date +%s) - started)) s"

step "results: triage"
$nj results "$triage" --format csv
step "results: stories"
$nj results "$stories" --format jsonl |
  /usr/bin/python3 -c '
import json, re, sys, textwrap, yaml
spec = yaml.safe_load(open("examples/stories/stories.yaml"))
prompts = {i["id"]: i["prompt"] for i in spec["items"]}
for line in sys.stdin:
    r = json.loads(line)
    item = next(i for i in spec["items"] if i["id"] == r["custom_id"])
    t = item.get("temperature", spec["defaults"]["temperature"])
    how = "greedy" if t == 0 else "temperature %g, seed %d" % (t, item.get("seed", spec["defaults"]["seed"]))
    print("-- %s: %s, %d tokens (%s, %s)\n" % (r["custom_id"], r["status"], r["output_tokens"],
                                             r.get("finish_reason"), how))
    text = re.sub(r"<\|end_of_msg\|>$", "", r.get("output_text") or "")    # the end-of-sequence token
    story = "[" + prompts[r["custom_id"]] + "]" + text
    for para in story.split("\n\n"):
        print(textwrap.fill(" ".join(para.split()), 100))
        print()'

step "morning report"
$nj report --out "$home/report.html"
echo
echo "HTML report: $home/report.html"
