#!/usr/bin/env python3
"""schemas/job.schema.json and `nightjar validate` agree: every example spec is valid for
both, every spec in tests/schema/bad/ is rejected by both (README.md in this directory)."""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
import njtest  # noqa: E402

import jsonschema  # noqa: E402  (Debian: python3-jsonschema)
import yaml  # noqa: E402  (Debian: python3-yaml)

ARGS = None
REPO = njtest.REPO
SCHEMA = json.loads((REPO / "schemas" / "job.schema.json").read_text())
WORK = MODEL = None


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("schema-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"), extra=["--tokenizer"])


# Specs name the demo models as the repository runs them (examples: ../../build/demo-model or
# ../../build/stories-model, bad specs: ../../../build/demo-model); the test points that line
# at its generated model.
DEMO_MODEL_LINE = re.compile(r"(?m)^model:\s*(\.\./)+build/(demo|stories)-model\s*$")


def copy_with_model(src_dir, dst_dir):
    """Copies src_dir to dst_dir, pointing every spec's demo-model line at MODEL."""
    if os.path.exists(dst_dir):
        shutil.rmtree(dst_dir)
    shutil.copytree(src_dir, dst_dir)
    for spec in Path(dst_dir).glob("*.yaml"):
        spec.write_text(DEMO_MODEL_LINE.sub("model: " + json.dumps(MODEL), spec.read_text()))


def schema_errors(doc):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [e.message for e in validator.iter_errors(doc)]


def header(path):
    """(expected error substring, whether the schema accepts the file) from its header: the
    first line, then any comment lines up to the YAML."""
    lines = Path(path).read_text().splitlines()
    m = re.match(r"# error: (.+)$", lines[0]) if lines else None
    if not m:
        raise AssertionError(f"{path}: the first line must be '# error: <substring>'")
    comments = [ln.strip() for ln in lines[1:next((i for i, ln in enumerate(lines) if not ln.startswith("#")),
                                                  len(lines))]]
    accepts = "# schema: accepts" in comments
    return m.group(1).strip(), accepts


def validate(path):
    return subprocess.run([ARGS.bin, "validate", str(path)], capture_output=True, text=True,
                          timeout=300)


class Schema(unittest.TestCase):
    def test_schema_is_a_valid_draft_2020_12_schema(self):
        jsonschema.Draft202012Validator.check_schema(SCHEMA)

    def test_every_example_spec_satisfies_the_schema_and_the_validator(self):
        examples = sorted((REPO / "examples").rglob("*.yaml"))
        self.assertTrue(examples, "no example spec under examples/")
        for path in examples:
            rel = path.relative_to(REPO / "examples")
            with self.subTest(str(rel)):
                doc = yaml.safe_load(path.read_text())
                self.assertEqual(schema_errors(doc), [], f"{rel} against the schema")
                # The C++ validator on a copy of the example's directory whose model is a
                # generated one (examples name build/demo-model, which may not exist).
                copy = Path(WORK) / "examples" / rel.parent
                copy_with_model(path.parent, copy)
                self.assertNotRegex((copy / path.name).read_text(), DEMO_MODEL_LINE)
                p = validate(copy / path.name)
                self.assertEqual(p.returncode, 0, f"nightjar validate {rel}: {p.stderr}")
                self.assertIn("OK", p.stdout)

    def test_every_bad_spec_is_rejected_by_the_schema_and_the_validator(self):
        bad_dir = REPO / "tests" / "schema" / "bad"
        bad = sorted(bad_dir.glob("*.yaml"))
        copy_with_model(bad_dir, Path(WORK) / "bad")  # with the data files some specs read
        self.assertGreaterEqual(len(bad), 8, "too few bad specs")
        for path in bad:
            with self.subTest(path.name):
                needle, schema_accepts = header(path)
                doc = yaml.safe_load(path.read_text())
                errors = schema_errors(doc)
                if schema_accepts:
                    self.assertEqual(errors, [], f"{path.name} is marked '# schema: accepts'")
                else:
                    self.assertNotEqual(errors, [], f"the schema accepts {path.name}")
                copy = Path(WORK) / "bad" / path.name
                p = validate(copy)
                self.assertEqual(p.returncode, 3, f"nightjar validate {path.name}: {p.stderr}")
                self.assertIn(needle, p.stderr, path.name)
                self.assertIn(str(copy), p.stderr, f"{path.name}: the message names the file")


if __name__ == "__main__":
    njtest.main(globals())
