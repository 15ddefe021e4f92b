#!/usr/bin/env python3
"""The morning report (issue 34): a summary across jobs first, failures first with their
errors, failed attempts and retries (kept across `retry`); per classify job the label counts,
documents per hour and the review list of the lowest margins (`--review N`); every failed item
listed whatever `--items` says; `report --output json` with `counts`, `label_counts` and
`review`; and the HTML page's structure (summary and failures tables, a label chart, the
review table, a legend naming every colour the timeline draws, axis labels that differ)."""
import collections
import json
import os
import re
import shutil
import unittest
import xml.etree.ElementTree as ET

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
TEMPLATE = "Classify the ticket as one of: {labels}.\nTicket: {document}\nLabel:"
LABELS = ["other", "feature request", "urgent", "question"]
DOCS = ["I was charged twice for my March subscription.", "The app crashes when I open the settings page.",
        "Please add a dark mode to the dashboard.", "What are your opening hours on holidays?",
        "My invoice shows the wrong company address.", "Sync fails with error 504 since this morning.",
        "Thanks for the quick help yesterday!"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("morning-report-")
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


class MorningReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(WORK, "night")
        os.makedirs(cls.dir)
        cls.nj = nj = njtest.Nightjar(ARGS.bin, os.path.join(cls.dir, "home"))
        lines = ["name: tickets", f"model: {json.dumps(MODEL)}", "kind: classify",
                 f"template: {json.dumps(TEMPLATE)}", f"labels: {json.dumps(LABELS)}", "items:"]
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(DOCS)]
        spec = os.path.join(cls.dir, "tickets.yaml")
        with open(spec, "w") as f:
            f.write("\n".join(lines) + "\n")
        cls.tickets = nj.submit(spec)
        cls.ok = nj.submit(njtest.write_spec(os.path.join(cls.dir, "ok.yaml"), "stories", MODEL,
                                             [{"id": f"s{k}", "prompt_ids": [5 + k, 9], "max_tokens": 3}
                                              for k in range(2)]))
        # A job whose model disappears: its items fail after max_attempts (2) each.
        gone = os.path.join(cls.dir, "model-gone")
        shutil.copytree(MODEL, gone)
        cls.bad = nj.submit(njtest.write_spec(os.path.join(cls.dir, "bad.yaml"), "doomed", gone,
                                              [{"id": f"b{k}", "prompt_ids": [1], "max_tokens": 2}
                                               for k in range(2)], max_attempts=2))
        shutil.rmtree(gone)
        p = nj.run("run", "--drain", "--retry-seconds", "0.05", *RUN)
        assert p.returncode == 4, p.stderr
        # Retried once and failed again: its failed attempts add up across the retry.
        assert nj.run("retry", "doomed", "b1").returncode == 0
        p = nj.run("run", "--drain", "--retry-seconds", "0.05", *RUN)
        assert p.returncode == 4, p.stderr
        cls.results = {r["custom_id"]: r for r in nj.results(cls.tickets)}

    def report(self, *args):
        p = self.nj.run("report", *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_text_summary_failures_first_labels_and_review(self):
        text = self.report("--items", "1", "--review", "3")
        lines = text.splitlines()
        self.assertEqual(lines[0], "Summary of 3 jobs (failures first):")
        rows = [l.split() for l in lines[2:5]]
        self.assertEqual([r[1] for r in rows], ["doomed", "tickets", "stories"], text)
        self.assertEqual(rows[0][2:9], ["failed", "0", "2", "0", "0", "0", "6"], "2 + 4 failed attempts")
        self.assertEqual(rows[0][9], "1", "one retry")
        self.assertRegex(text, r"(?m)^    b0: 2 failed attempts: .*model-gone")
        self.assertRegex(text, r"(?m)^    b1: 4 failed attempts, retried 1 time: .*model-gone")
        # Per-job sections in the same order; the failed items are listed despite --items 1.
        self.assertLess(text.index("job 3 'doomed'"), text.index("job 1 'tickets'"))
        section = text[text.index("job 3 'doomed'"):text.index("job 1 'tickets'")]
        self.assertRegex(section, r"(?m)^  b0\s+failed\s+2 ")
        self.assertRegex(section, r"(?m)^  b1\s+failed\s+4 .*retried 1 time")
        self.assertIn("waiting on disk:  - (no engine time)", section, "no engine time is not 0 %")
        counts = collections.Counter(r["details"]["label"] for r in self.results.values())
        want = ", ".join(f"{label} {counts.get(label, 0)}" for label in LABELS)
        self.assertIn(f"  labels:           {want}\n", text)
        self.assertRegex(text, r"(?m)^  documents/hour:   [0-9]+ \(7 done in ")
        by_margin = sorted(self.results.values(), key=lambda r: r["details"]["margin"])[:3]
        review = re.findall(r"(?m)^    (d\d)\s+(.+?)\s+margin ([0-9.]+)$", text)
        self.assertEqual([r[0] for r in review], [r["custom_id"] for r in by_margin])
        self.assertEqual([r[1] for r in review], [r["details"]["label"] for r in by_margin])
        self.assertIn("... and 1 more item (--items 0 lists all)", text, "plural and singular")

    def test_json_counts_label_counts_and_review(self):
        out = self.report("--output", "json", "--review", "4")
        self.assertTrue(out.endswith("}\n"))
        jobs = json.loads(out)["jobs"]
        self.assertEqual([j["name"] for j in jobs], ["doomed", "tickets", "stories"])
        doomed, tickets, stories = jobs
        self.assertEqual(doomed["counts"], {"done": 0, "failed": 2, "cancelled": 0, "queued": 0, "running": 0,
                                            "total": 2})
        self.assertEqual([(f["custom_id"], f["failed_attempts"], f["retries"]) for f in doomed["failed_items"]],
                         [("b0", 2, 0), ("b1", 4, 1)])
        self.assertEqual(stories["counts"]["done"], 2)
        self.assertNotIn("label_counts", stories)
        counts = collections.Counter(r["details"]["label"] for r in self.results.values())
        self.assertEqual(tickets["label_counts"], {label: counts.get(label, 0) for label in LABELS})
        by_margin = sorted(self.results.values(), key=lambda r: r["details"]["margin"])[:4]
        self.assertEqual(tickets["review"], [{"custom_id": r["custom_id"], "label": r["details"]["label"],
                                              "margin": r["details"]["margin"]} for r in by_margin])
        self.assertGreater(tickets["documents_per_hour"], 0)
        one = json.loads(self.report("tickets", "--output", "json", "--review", "0"))["jobs"]
        self.assertEqual(len(one), 1)
        self.assertEqual(one[0]["review"], [])
        # The home may come before or after the job (a repeatable --home takes one value).
        p = njtest.subprocess.run([ARGS.bin, "report", "--home", self.nj.home, "tickets", "--output", "json"],
                                  capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([j["name"] for j in json.loads(p.stdout)["jobs"]], ["tickets"])

    def test_html_structure(self):
        path = os.path.join(self.dir, "report.html")
        self.report("--out", path, "--items", "1")
        with open(path, encoding="utf-8") as f:
            html = f.read()
        root = ET.fromstring(html.split("\n", 1)[1])
        summary = root.find(".//table[@id='summary']")
        self.assertIsNotNone(summary)
        rows = summary.findall("tr")[1:]
        self.assertEqual([r.findall("td")[1].text for r in rows], ["doomed", "tickets", "stories"])
        failures = root.find(".//table[@id='failures']")
        self.assertEqual([r.findall("td")[1].text for r in failures.findall("tr")[1:]], ["b0", "b1"])
        chart = root.find(".//svg[@class='labels']")
        self.assertEqual(len(chart.findall("rect")), len(LABELS), "one bar per label")
        review = root.find(".//table[@class='review']")
        self.assertEqual(len(review.findall("tr")) - 1, 7, "default --review 10 lists the 7 documents")
        legends = root.findall(".//p[@class='legend']")
        self.assertEqual(len(legends), 2, "one legend per timeline; none for the job without engine time")
        self.assertIn("No item reached the engine (0 s of engine time): no timeline.", html)
        swatches = {s.get("class") for s in legends[0].findall("span")}
        drawn = set(re.findall(r'<rect class="(io|compute|idle|failed|running)"', html))
        self.assertTrue({"swatch-" + c for c in drawn} <= swatches, (drawn, swatches))
        self.assertIn("swatch-failed", swatches)
        for svg in root.findall(".//svg"):
            title = svg.find("title")
            if title is None or title.text != "per-item timeline":
                continue
            ticks = [t.text for t in svg.findall("text") if t.get("y") == "12"]
            self.assertEqual(len(set(ticks)), len(ticks), f"axis labels differ: {ticks}")
        items = root.findall(".//table[@class='items']")
        doomed_items = [r.findall("td")[0].text for r in items[0].findall("tr")[1:]]
        self.assertEqual(doomed_items, ["b0", "b1"], "failed items listed past --items 1")


if __name__ == "__main__":
    njtest.main(globals())
