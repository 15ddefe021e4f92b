#!/usr/bin/python3
"""Summarises a streaming pipeline timeline (stream_bench --timeline FILE).

For each trunk unit the forward pass waited on, per decoded token:
  lead    submit -> the pass asks for it        (how far ahead its read was queued)
  queue   submit -> its first read starts       (behind other reads, or no free I/O thread)
  read    first read start -> last read end
  dqueue  summed time its blocks waited for a decode thread (read end -> decode start)
  decode  summed block decode time (decode start -> end; without decode_start events,
          from read end)
  ready   submit -> bytes all there (last read or decode end)
  wait    the pass asks -> has the bytes
  hold    has the bytes -> lets it go           (the layer's compute, its expert reads included)
and per token: the disk's busy time (any read in flight), the routed experts' reads, the
time any block was decoding (decode_busy_s), and the time between letting a unit go and
asking for the next one: between_s, of which between_pinned_s where the pass computed a
pinned layer in between (the next unit asked for is not the one after), the rest being the
pass's own time between layers (on a loaded host: waiting for a CPU).
  timeline_summary.py FILE
"""
import json
import statistics
import sys
from collections import defaultdict


def union_s(spans):
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def main(path):
    events = [json.loads(line) for line in open(path)]
    tokens = sorted(e["t"] for e in events if e["kind"] == "token")
    t_end = max(e["t"] for e in events if e["kind"] == "end")
    bounds = tokens + [t_end]
    per_unit = defaultdict(lambda: defaultdict(list))
    per_token = []
    for i in range(len(tokens)):
        t0, t1 = bounds[i], bounds[i + 1]
        evs = [e for e in events if "unit" in e and t0 <= e["t"] < t1]
        # Reads of this token, paired start -> end per (unit, block) in order.
        open_reads, read_spans, expert_spans, decode_s = {}, [], [], 0.0
        open_decodes, decode_spans = {}, []
        for e in evs:
            key = (e["unit"], e["block"])
            if e["kind"] == "decode_start":
                open_decodes.setdefault(key, []).append(e["t"])
            elif e["kind"] == "decode_end" and open_decodes.get(key):
                decode_spans.append((open_decodes[key].pop(0), e["t"]))
            elif e["kind"] == "read_start":
                open_reads.setdefault(key, []).append(e["t"])
            elif e["kind"] == "read_end" and open_reads.get(key):
                a = open_reads[key].pop(0)
                (expert_spans if e["unit"] == -2 else read_spans).append((a, e["t"]))
        waits = 0.0
        for u in sorted({e["unit"] for e in evs if e["kind"] == "wait_begin"}):
            ue = [e for e in events if e.get("unit") == u]
            wb = min(e["t"] for e in ue if e["kind"] == "wait_begin" and t0 <= e["t"] < t1)
            we = min(e["t"] for e in ue if e["kind"] == "wait_end" and e["t"] >= wb)
            rel = [e["t"] for e in ue if e["kind"] == "release" and e["t"] >= we]
            subs = [e["t"] for e in ue if e["kind"] == "submit" and e["t"] <= wb]
            if not subs:
                continue
            sub = max(subs)
            after = [e for e in ue if sub <= e["t"] <= we + 1e-3]
            starts = [e["t"] for e in after if e["kind"] == "read_start"]
            ends = [e["t"] for e in after if e["kind"] == "read_end"]
            dec_ends = {e["block"]: e["t"] for e in after if e["kind"] == "decode_end"}
            end_by_block = {e["block"]: e["t"] for e in after if e["kind"] == "read_end"}
            dec_starts = {e["block"]: e["t"] for e in after if e["kind"] == "decode_start"}
            dec_starts = {b: dec_starts.get(b, end_by_block.get(b)) for b in dec_ends}
            dec = sum(dec_ends[b] - dec_starts[b] for b in dec_ends if dec_starts[b] is not None)
            dq = sum(dec_starts[b] - end_by_block[b] for b in dec_ends
                     if b in end_by_block and dec_starts[b] is not None)
            decode_s += dec
            ready = max(ends + list(dec_ends.values())) if ends else we
            d = per_unit[u]
            d["lead"].append(wb - sub)
            d["queue"].append((min(starts) - sub) if starts else 0.0)
            d["read"].append((max(ends) - min(starts)) if starts else 0.0)
            d["dqueue"].append(dq)
            d["decode"].append(dec)
            d["ready"].append(ready - sub)
            d["wait"].append(we - wb)
            d["hold"].append((rel[0] - we) if rel else 0.0)
            waits += we - wb
        marks = sorted((e["t"], e["kind"], e["unit"]) for e in evs
                       if e["kind"] in ("release", "wait_begin"))
        between, between_pinned, last = 0.0, 0.0, None
        for t, kind, u in marks:
            if kind == "release":
                last = (t, u)
            elif last is not None:
                gap = t - last[0]
                between += gap
                if u != last[1] + 1:
                    between_pinned += gap
                last = None
        per_token.append({
            "s": t1 - t0,
            "trunk_wait_s": waits,
            "disk_busy_s": union_s(read_spans + expert_spans),
            "trunk_read_busy_s": union_s(read_spans),
            "expert_read_busy_s": union_s(expert_spans),
            "decode_thread_s": decode_s,
            "decode_busy_s": union_s(decode_spans),
            "between_s": between,
            "between_pinned_s": between_pinned,
        })
    print("per token (median over %d tokens):" % len(per_token))
    for k in per_token[0]:
        print("  %-20s %.4f" % (k, statistics.median(t[k] for t in per_token)))
    print("per trunk unit, ms, medians over tokens:")
    cols = ["lead", "queue", "read", "dqueue", "decode", "ready", "wait", "hold"]
    print("  unit " + " ".join("%7s" % c for c in cols))
    totals = defaultdict(float)
    for u in sorted(per_unit):
        row = [statistics.median(per_unit[u][c]) * 1e3 for c in cols]
        for c, v in zip(cols, row):
            totals[c] += v
        print("  %4d " % u + " ".join("%7.1f" % v for v in row))
    print("   sum " + " ".join("%7.1f" % totals[c] for c in cols))


if __name__ == "__main__":
    main(sys.argv[1])
