#!/usr/bin/env python3
"""Helpers of tests/slurm/run.sh (Debian's python3).

  answers.py same A.jsonl B.jsonl       exit 0 when both hold the same items in the same
                                        order with the same answers (the record without
                                        attempts, timings and engine usage:
                                        runner/results/result_record.h), each item once
  answers.py spec OUT.yaml MODEL N TOKENS   writes a generate spec of N sampled items
  answers.py task-ids DIR TASK          the custom_ids the array's manifest gives TASK
  answers.py home HOME.db SQL           the first column of a query's rows, one per line
"""
import json
import sqlite3
import sys


def answers(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            for key in ("attempts", "timings", "engine"):
                r.pop(key, None)
            out.append(r)
    return out


def same(a_path, b_path):
    a, b = answers(a_path), answers(b_path)
    ids = [r["custom_id"] for r in a]
    if len(set(ids)) != len(ids):
        print(f"{a_path}: an item appears more than once", file=sys.stderr)
        return 1
    if [r["custom_id"] for r in b] != ids:
        print(f"{a_path} and {b_path} hold other items or another order", file=sys.stderr)
        return 1
    for x, y in zip(a, b):
        if x != y:
            print(f"item {x['custom_id']}: {json.dumps(x)[:300]} != {json.dumps(y)[:300]}", file=sys.stderr)
            return 1
    if not all(r["status"] == "done" for r in a):
        print(f"{a_path}: not every item is done", file=sys.stderr)
        return 1
    print(f"{len(a)} items, identical answers")
    return 0


def spec(out, model, n, tokens):
    lines = ["name: slurm-check", f"model: {json.dumps(model)}", "kind: generate",
             f"defaults: {{max_tokens: {int(tokens)}, temperature: 0.8, top_p: 0.9, top_k: 40}}", "items:"]
    for i in range(int(n)):
        prompt = [(i * 31 + k * 7 + 3) % 256 for k in range(8 + i % 5)]
        lines.append(f"  - id: req-{i:02d}")
        lines.append(f"    prompt_ids: {json.dumps(prompt)}")
        lines.append(f"    seed: {100 + i}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def task_ids(array_dir, task):
    with open(f"{array_dir}/array.json") as f:
        m = json.load(f)
    for item in m["items"]:
        if item["task"] == int(task):
            print(item["custom_id"])
    return 0


def home(db, sql):
    con = sqlite3.connect(db, timeout=30)
    try:
        for row in con.execute(sql):
            print(row[0])
    finally:
        con.close()
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    sys.exit({"same": same, "spec": spec, "task-ids": task_ids, "home": home}[cmd](*args))
