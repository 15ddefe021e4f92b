#!/usr/bin/env python3
"""Prints the longest function definitions under the given folders (default: runner),
measured by Universal Ctags as the lines from a function's first line to its closing brace
(a lambda counts inside the function that holds it).

    python3 tests/tools/longest_functions.py [--top N] [--max LINES] [FOLDER...]

With --max, exits 1 when a function is longer than LINES (issue 31: runner/ under 120)."""
import argparse
import json
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("folders", nargs="*", default=["runner"])
parser.add_argument("--top", type=int, default=10)
parser.add_argument("--max", type=int, default=0)
args = parser.parse_args()

out = subprocess.run(
    ["ctags", "-R", "--languages=C++", "--kinds-C++=f", "--fields=+ne", "--output-format=json",
     "-o", "-", *args.folders],
    check=True, capture_output=True, text=True).stdout
functions = []
for line in out.splitlines():
    tag = json.loads(line)
    if tag.get("_type") != "tag" or "end" not in tag:
        continue
    if tag["name"].startswith("__anon"):  # a lambda: part of the function around it
        continue
    scope = tag.get("scope", "")
    name = (scope + "::" if scope else "") + tag["name"]
    functions.append((tag["end"] - tag["line"] + 1, tag["path"], tag["line"], name))
functions.sort(reverse=True)
for lines, path, start, name in functions[: args.top]:
    print(f"{lines:5d}  {path}:{start}  {name}")
if args.max and functions and functions[0][0] > args.max:
    print(f"longest function: {functions[0][0]} lines, over {args.max}")
    sys.exit(1)
