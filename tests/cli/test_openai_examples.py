#!/usr/bin/env python3
"""Issue 16, bug 2: classify results in the OpenAI format broke the shipped schema
(`finish_reason: "label"`), their `content` had a leading space that `output_text` lacks,
and their `prompt_tokens` disagreed with the JSON Lines results. Every example job runs on
the demo model, and every `results --format openai` line must be valid against
schemas/openai_batch_output.schema.json and agree with `results` (JSON Lines)."""
import json
import os
import re
import shutil
import unittest
from pathlib import Path

import jsonschema  # Debian: python3-jsonschema

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
SCHEMA = json.loads((njtest.REPO / "schemas/openai_batch_output.schema.json").read_text())
# Example specs name their model as deploy/demo.sh builds it (../../build/demo-model for
# triage, ../../build/stories-model for the stories). Here triage runs on a random model of the
# demo preset and the stories on the committed story model (their spec's memory budget is set
# for its size).
DEMO_MODEL_LINE = re.compile(r"(?m)^model:\s*(\.\./)+build/(demo|stories)-model\s*$")
STORY_MODEL = njtest.REPO / "examples" / "stories" / "model"


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("openai-examples-")
    MODEL = njtest.make_model(os.path.join(WORK, "demo-model"), preset="demo")


class OpenAiLinesOfEveryExample(unittest.TestCase):
    def test_every_openai_line_of_every_example_job_is_valid_and_agrees_with_jsonl(self):
        home = os.path.join(WORK, "home")
        nj = njtest.Nightjar(ARGS.bin, home)
        specs = sorted((njtest.REPO / "examples").rglob("*.yaml"))
        self.assertGreaterEqual(len(specs), 2, "the examples hold a generate and a classify job")
        jobs = {}
        for spec in specs:
            copy = Path(WORK) / "examples" / spec.parent.name
            shutil.copytree(spec.parent, copy)
            text = (copy / spec.name).read_text()
            self.assertRegex(text, DEMO_MODEL_LINE)
            model = str(STORY_MODEL) if DEMO_MODEL_LINE.search(text).group(2) == "stories" else MODEL
            (copy / spec.name).write_text(DEMO_MODEL_LINE.sub("model: " + json.dumps(model), text))
            jobs[spec.name] = nj.submit(copy / spec.name)
        p = nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        validator = jsonschema.Draft202012Validator(SCHEMA)
        kinds = set()
        for name, job in jobs.items():
            p = nj.run("results", str(job), "--format", "openai")
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = [json.loads(line) for line in p.stdout.splitlines()]
            jsonl = {r["custom_id"]: r for r in nj.results(job)}
            self.assertEqual(sorted(r["custom_id"] for r in lines), sorted(jsonl))
            for line in lines:
                with self.subTest(job=name, custom_id=line["custom_id"]):
                    self.assertEqual([e.message for e in validator.iter_errors(line)], [])
                    r = jsonl[line["custom_id"]]
                    self.assertEqual(r["status"], "done")
                    body = line["response"]["body"]
                    usage = body["usage"]
                    self.assertEqual(usage["prompt_tokens"], r["prompt_tokens"])
                    self.assertEqual(usage["completion_tokens"], r["output_tokens"])
                    choice = body["choices"][0]
                    if "details" in r:  # a classification: the answer is the label
                        kinds.add("classify")
                        self.assertEqual(choice["message"]["content"], r["details"]["label"])
                        self.assertEqual(choice["message"]["content"], r["output_text"])
                        self.assertEqual(choice["finish_reason"], "stop")
                        d = r["details"]
                        self.assertEqual(r["prompt_tokens"], d["prefix_tokens"] + d["suffix_tokens"],
                                         "the prompt is the template prefix, the document and the suffix")
                    else:
                        kinds.add("generate")
                        self.assertEqual(choice["finish_reason"], r["finish_reason"])
                        self.assertTrue(r["output_text"].startswith(choice["message"]["content"]))
        self.assertEqual(kinds, {"classify", "generate"})


if __name__ == "__main__":
    njtest.main(globals())
