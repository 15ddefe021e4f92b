"""Shared helpers for the end-to-end tests of the `nightjar` program (tests/cli, tests/crash,
tests/bench): generated models, job specs, running commands, reading the job store.

Models are generated at test time with tests/reference/make_model.py into the test's scratch
directory (never taken from elsewhere)."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"  # Debian's, with numpy (make_model.py needs it)


def scratch_dir(prefix):
    """A fresh directory under $NJ_TEST_SCRATCH (the build tree, set by ctest) or $TMPDIR."""
    base = os.environ.get("NJ_TEST_SCRATCH") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def make_model(out_dir, preset="tiny", seed=1, extra=()):
    """Generates a model with make_model.py (skipped when out_dir already holds one)."""
    out_dir = str(out_dir)
    if not os.path.exists(os.path.join(out_dir, "config.json")):
        cmd = [PYTHON, str(REPO / "tests/reference/make_model.py"), "--out", out_dir, "--preset", preset,
               "--seed", str(seed), *extra]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    return out_dir


def yaml_value(v):
    """YAML flow style is a superset of JSON: JSON text is a valid YAML value."""
    return json.dumps(v)


def write_spec(path, name, model, items, **job):
    """Writes a job spec. `items`: dicts with id, prompt_ids / prompt and per-item keys;
    `job`: top-level keys (kind defaults to generate; defaults={...} allowed)."""
    lines = [f"name: {yaml_value(name)}", f"model: {yaml_value(str(model))}",
             f"kind: {job.pop('kind', 'generate')}"]
    for k, v in job.items():
        lines.append(f"{k}: {yaml_value(v)}")
    lines.append("items:")
    for item in items:
        first = True
        for k, v in item.items():
            lines.append(("  - " if first else "    ") + f"{k}: {yaml_value(v)}")
            first = False
    Path(path).write_text("\n".join(lines) + "\n")
    return str(path)


class Nightjar:
    """The nightjar binary bound to one home directory."""

    def __init__(self, binary, home):
        self.bin = binary
        self.home = str(home)

    def cmd(self, *args):
        return [self.bin, *args, "--home", self.home]

    def run(self, *args, timeout=600, env=None):
        return subprocess.run(self.cmd(*args), capture_output=True, text=True, timeout=timeout, env=env)

    def popen(self, *args, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL):
        return subprocess.Popen(self.cmd(*args), stderr=stderr, stdout=stdout)

    def submit(self, spec):
        p = self.run("submit", str(spec), "--output", "json")
        if p.returncode != 0:
            raise AssertionError(f"submit failed ({p.returncode}): {p.stderr}")
        return json.loads(p.stdout)["job_id"]

    def results(self, job):
        p = self.run("results", str(job))
        if p.returncode != 0:
            raise AssertionError(f"results failed ({p.returncode}): {p.stderr}")
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]

    def status(self, job=None):
        p = self.run("status", *([str(job)] if job is not None else []), "--output", "json")
        if p.returncode != 0:
            raise AssertionError(f"status failed ({p.returncode}): {p.stderr}")
        return json.loads(p.stdout)

    def db(self):
        return os.path.join(self.home, "nightjar.db")

    def query(self, sql, args=()):
        """Rows of a query on the store (a short-lived connection; safe while `run` works)."""
        con = sqlite3.connect(self.db(), timeout=30)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def dump(self):
        """Every row of every table, for "the store is unchanged" comparisons."""
        if not os.path.exists(self.db()):
            return None
        con = sqlite3.connect(self.db(), timeout=30)
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
            return {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
        finally:
            con.close()

    def integrity(self):
        return [r[0] for r in self.query("PRAGMA integrity_check")]

    def events(self, kind=None):
        rows = self.query("SELECT item_id, kind, detail FROM events ORDER BY id")
        out = [(i, k, json.loads(d) if d else None) for i, k, d in rows]
        return [e for e in out if kind is None or e[1] == kind]


_REFERENCE_CACHE = {}


def reference_output(binary, model, item, threads=1):
    """Output ids of plain `nightjar generate` for one spec item (the engine's own answer)."""
    key = (binary, str(model), json.dumps(item, sort_keys=True))
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[key] = _generate(binary, model, item, threads)
    return _REFERENCE_CACHE[key]


def _generate(binary, model, item, threads):
    args = [binary, "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, item["prompt_ids"])),
            "--max-tokens", str(item.get("max_tokens", 64)), "--temperature", str(item.get("temperature", 0)),
            "--seed", str(item.get("seed", 0)), "--top-k", str(item.get("top_k", 0)),
            "--top-p", str(item.get("top_p", 1)), "--threads", str(threads), "--output", "json",
            *(["--ignore-eos"] if item.get("ignore_eos") else [])]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"generate failed: {p.stderr}")
    return json.loads(p.stdout)["output_ids"]


def main(test_module_globals, extra_args=None):
    """Common entry: --bin NIGHTJAR [extra], then unittest on the remaining argv."""
    import argparse
    import unittest
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    for name, kwargs in (extra_args or []):
        ap.add_argument(name, **kwargs)
    args, rest = ap.parse_known_args()
    args.bin = os.path.abspath(args.bin)
    test_module_globals["ARGS"] = args
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
