#!/usr/bin/env python3
"""Run the float64 reference (k3ref) on a K3 checkpoint directory.

  /usr/bin/python3 tests/reference/forward.py --model DIR --prompt-ids 3,7,11 \
      [--max-tokens N] --output json

Prints one JSON object:
  output_ids       greedy continuation (argmax, ties -> lower id), by full recompute
  argmax           teacher-forced argmax at every position of prompt + output_ids
  logits           the full logit row of every position of prompt + output_ids (float64)
  min_top2_margin  smallest (largest - second largest) logit over those rows
  min_route_gap    smallest non-zero gap at the top-k boundary of s + bias (routing robustness)
  designed_route_ties  count of exact ties at that boundary (e.g. presets with --router-tie)
--output text prints the ids and margins only.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from k3ref import K3Model  # noqa: E402


def parse_ids(s):
    try:
        ids = [int(x) for x in s.split(",") if x.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError("--prompt-ids must be comma-separated integers")
    if not ids:
        raise argparse.ArgumentTypeError("--prompt-ids is empty")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    ap.add_argument("--prompt-ids", required=True, type=parse_ids)
    ap.add_argument("--max-tokens", type=int, default=0, help="greedy tokens to generate (default 0)")
    ap.add_argument("--output", choices=["json", "text"], default="json")
    a = ap.parse_args(argv)
    t0 = time.time()
    model = K3Model(a.model)
    r = model.run(a.prompt_ids, a.max_tokens, collect_stats=True)
    st = model.stats
    out = {
        "prompt_ids": a.prompt_ids,
        "output_ids": r["output_ids"],
        "argmax": r["argmax"],
        "min_top2_margin": r["min_top2_margin"],
        "min_route_gap": None if st["min_route_gap"] == float("inf") else st["min_route_gap"],
        "designed_route_ties": st["route_ties"],
        "seconds": round(time.time() - t0, 3),
        "logits": [[float(v) for v in row] for row in r["logits"]],
    }
    if a.output == "json":
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        for k in ("output_ids", "argmax", "min_top2_margin", "min_route_gap", "designed_route_ties", "seconds"):
            print("%s: %s" % (k, out[k]))


if __name__ == "__main__":
    main()
