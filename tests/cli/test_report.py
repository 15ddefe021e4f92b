#!/usr/bin/env python3
"""`nightjar report`: the morning summary of a small job run on a generated model, as text
(its numbers agree with `results` and the store) and as a self-contained HTML page that an
XML parser accepts and that fetches nothing."""
import os
import re
import shutil
import sqlite3
import unittest
import xml.etree.ElementTree as ET

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("report-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


class Report(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(WORK, "job")
        os.makedirs(cls.dir)
        cls.nj = njtest.Nightjar(ARGS.bin, os.path.join(cls.dir, "home"))
        items = [{"id": "a<&>\"'", "prompt_ids": [3, 7, 11], "max_tokens": 9},
                 {"id": "b", "prompt_ids": [5, 6], "max_tokens": 14, "temperature": 0.8, "seed": 3},
                 {"id": "c", "prompt_ids": [9], "max_tokens": 6},
                 {"id": "d", "prompt_ids": [2, 4], "max_tokens": 5}]
        spec = njtest.write_spec(os.path.join(cls.dir, "job.yaml"), "night <b>&amp;</b>", MODEL, items)
        cls.job = cls.nj.submit(spec)
        p = cls.nj.run("run", "--drain", "--max-items", "3", *RUN)
        assert p.returncode == 0, p.stderr
        cls.html_path = os.path.join(cls.dir, "report.html")
        cls.text = cls.nj.run("report", str(cls.job), "--out", cls.html_path)
        with open(cls.html_path, encoding="utf-8") as f:
            cls.html = f.read()

    def field(self, name):
        m = re.search(rf"^  {name}:\s+(.*)$", self.text.stdout, re.M)
        self.assertIsNotNone(m, f"'{name}' in:\n{self.text.stdout}")
        return m.group(1)

    def test_text_summary_numbers_agree_with_results_and_the_store(self):
        self.assertEqual(self.text.returncode, 0, self.text.stderr)
        results = self.nj.results(self.job)
        tokens = sum(r["output_tokens"] for r in results)
        self.assertGreater(tokens, 0)
        self.assertEqual(int(self.field("tokens generated")), tokens)
        self.assertEqual(self.field("items"), "3 done, 0 failed, 0 cancelled, 1 queued, 0 running (4 in all)")
        (start, finish, engine, io, compute, read) = self.nj.query(
            "SELECT min(started_at), max(finished_at), sum(prefill_s + decode_s), sum(io_wait_s), "
            "sum(compute_s), sum(bytes_read) FROM items WHERE job_id = ?", (self.job,))[0]
        wall = re.match(r"([0-9.]+) (s|min) \(", self.field("wall time"))
        self.assertIsNotNone(wall)
        self.assertAlmostEqual(float(wall.group(1)), finish - start, delta=0.051)
        m = re.search(r"; ([0-9.]+) s per output token", self.field("engine time"))
        self.assertIsNotNone(m)
        self.assertAlmostEqual(float(m.group(1)), engine / tokens, delta=1e-4)
        share = 100 * io / max(engine, io + compute)
        self.assertTrue(self.field("waiting on disk").startswith(f"{share:.1f}% of engine time"))
        self.assertIn(f"({read} bytes)", self.field("bytes read"))
        self.assertRegex(self.text.stdout, r"(?m)^  d\s+queued\s+0 ")

    def test_html_is_well_formed_and_self_contained(self):
        root = ET.fromstring(self.html.split("\n", 1)[1])  # after <!DOCTYPE html>
        self.assertEqual(root.tag, "html")
        self.assertTrue(self.html.startswith("<!DOCTYPE html>\n"))
        for needle in ("http://", "https://", "src=", "<script", "url(", "href=", "@import"):
            self.assertNotIn(needle, self.html.lower(), needle)
        text = "".join(root.itertext())
        self.assertIn("night <b>&amp;</b>", text, "the job name is escaped, not markup")
        self.assertIn("a<&>\"'", text, "item ids are escaped")
        self.assertIsNone(root.find(".//b"), "no markup from user text")
        svgs = root.findall(".//svg")
        self.assertGreaterEqual(len(svgs), 2, "an I/O-share bar and a timeline")
        timeline = [s for s in svgs if s.find("title") is not None and s.find("title").text == "per-item timeline"]
        self.assertEqual(len(timeline), 1)
        bars = [g for g in timeline[0].findall("g") if g.find("rect") is not None]
        self.assertEqual(len(bars), 3, "one bar per finished item")
        tokens = sum(r["output_tokens"] for r in self.nj.results(self.job))
        self.assertIn(f"<tr><th>tokens generated</th><td>{tokens}</td></tr>", self.html)

    def test_a_running_item_gets_a_bar_to_the_report_time(self):
        # As if another runner held item d: a copy of the home with d running since the last
        # finish. Its bar starts there and reaches the axis end, the report's time.
        home = os.path.join(self.dir, "running-home")
        shutil.copytree(self.nj.home, home)
        other = njtest.Nightjar(ARGS.bin, home)
        con = sqlite3.connect(other.db())
        with con:
            con.execute("UPDATE items SET state = 'running', lease_owner = 'elsewhere/1/0', "
                        "lease_expires = 1e12, started_at = "
                        "(SELECT max(finished_at) FROM items WHERE job_id = ?) "
                        "WHERE job_id = ? AND custom_id = 'd'", (self.job, self.job))
        con.close()
        path = os.path.join(self.dir, "running.html")
        p = other.run("report", str(self.job), "--out", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3 done, 0 failed, 0 cancelled, 0 queued, 1 running", p.stdout)
        with open(path, encoding="utf-8") as f:
            root = ET.fromstring(f.read().split("\n", 1)[1])
        timeline = [s for s in root.findall(".//svg")
                    if s.find("title") is not None and s.find("title").text == "per-item timeline"][0]
        bars = [g for g in timeline.findall("g") if g.find("rect") is not None]
        self.assertEqual(len(bars), 4, "three finished items and the running one")
        running = [r for g in bars for r in g.findall("rect") if r.get("class") == "running"]
        self.assertEqual(len(running), 1)
        self.assertIn("d: running", bars[3].find("title").text)
        x, w = float(running[0].get("x")), float(running[0].get("width"))
        finished_ends = [max(float(r.get("x")) + float(r.get("width")) for r in g.findall("rect"))
                         for g in bars[:3]]
        self.assertAlmostEqual(x, max(finished_ends), delta=0.05)
        self.assertAlmostEqual(x + w, 890, delta=0.05)  # label width 180 + plot width 710

    def test_every_job_without_arguments_and_several_jobs(self):
        p = self.nj.run("report")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, self.text.stdout)
        p = self.nj.run("report", str(self.job), str(self.job))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("tokens generated:"), 2)

    def test_unknown_job_and_missing_store(self):
        p = self.nj.run("report", "nope")
        self.assertEqual(p.returncode, 3)
        self.assertIn("nope", p.stderr)
        other = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "empty-home"))
        self.assertEqual(other.run("report").returncode, 3)


if __name__ == "__main__":
    njtest.main(globals())
