"""`cmake --install BUILD --prefix P` installs a working nightjar (issue 34): P/bin/nightjar
runs (--version, and `validate` of an example spec against the installed schema's rules),
the schemas land in P/share/nightjar/schemas and the systemd units in P/lib/systemd/system
with ExecStart naming P/bin/nightjar."""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from njtest import REPO, scratch_dir  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)  # the build's nightjar (unused: the installed one runs)
    ap.add_argument("--cmake", required=True)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    prefix = os.path.join(scratch_dir("install-"), "prefix")
    p = subprocess.run([args.cmake, "--install", args.build_dir, "--prefix", prefix],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"cmake --install failed: {p.stdout}\n{p.stderr}"
    nj = os.path.join(prefix, "bin", "nightjar")
    assert os.access(nj, os.X_OK), f"{nj} missing or not executable:\n{p.stdout}"
    v = subprocess.run([nj, "--version"], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and v.stdout.startswith("nightjar "), (v.returncode, v.stdout, v.stderr)
    # The installed binary does real work, not only --version: doctor's JSON on a temp dir.
    d = subprocess.run([nj, "doctor", "--dir", prefix, "--probe-size", "4MiB", "--no-memory-probe",
                        "--output", "json"], capture_output=True, text=True, timeout=120)
    assert d.returncode == 0, (d.stdout, d.stderr)
    assert isinstance(json.loads(d.stdout), dict), d.stdout
    schemas = os.path.join(prefix, "share", "nightjar", "schemas")
    for name in ("job.schema.json", "openai_batch_output.schema.json"):
        path = os.path.join(schemas, name)
        assert os.path.isfile(path), f"{path} missing"
        with open(path) as f, open(REPO / "schemas" / name) as g:
            assert json.load(f) == json.load(g), f"{path} differs from schemas/{name}"
    units = os.path.join(prefix, "lib", "systemd", "system")
    service = os.path.join(units, "nightjar-night.service")
    timer = os.path.join(units, "nightjar-night.timer")
    assert os.path.isfile(timer), f"{timer} missing"
    text = open(service).read()
    exec_lines = [l for l in text.splitlines() if l.startswith("ExecStart=")]
    assert exec_lines == [f"ExecStart={nj} run --until 07:00 --drain"], exec_lines
    shutil.rmtree(os.path.dirname(prefix), ignore_errors=True)
    print("install: ok")


if __name__ == "__main__":
    main()
