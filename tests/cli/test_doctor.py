#!/usr/bin/env python3
"""`nightjar doctor` end to end: JSON fields on a real directory, errors on bad ones."""
import argparse, json, os, subprocess, sys, tempfile, unittest

BIN = None


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


class Doctor(unittest.TestCase):
    def test_json_reports_simd_odirect_and_bandwidth(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", ".")) as d:
            p = run("doctor", "--dir", d, "--output", "json", "--probe-size", "32MiB",
                    "--no-memory-probe")
            self.assertEqual(p.returncode, 0, p.stderr)
            j = json.loads(p.stdout)
            self.assertIn(j["simd_level"], ("avx512", "avx2", "scalar"))
            self.assertIsInstance(j["odirect_supported"], bool)
            self.assertGreater(j["buffered_read_gbps"], 0)
            if j["odirect_supported"]:
                self.assertGreater(j["direct_read_gbps"], 0)
            self.assertGreater(j["ram_total_bytes"], 0)
            self.assertEqual(os.listdir(d), [], "the probe file must be removed")

    def test_missing_directory_names_it(self):
        p = run("doctor", "--dir", "/nonexistent/nightjar-x", "--no-memory-probe")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent/nightjar-x", p.stderr)

    def test_unreadable_directory_is_an_error(self):
        if os.geteuid() == 0:
            self.skipTest("root can read any directory")
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0)
            p = run("doctor", "--dir", d, "--no-memory-probe")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(d, p.stderr)

    def test_bad_probe_size_is_a_usage_error_naming_the_text(self):
        p = run("doctor", "--probe-size", "lots")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'lots'", p.stderr)

    def test_help_lists_exit_codes_and_version_prints(self):
        p = run("--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn("Exit codes", p.stdout)
        v = run("--version")
        self.assertEqual(v.returncode, 0)
        self.assertTrue(v.stdout.startswith("nightjar "))

    def test_unknown_option_is_usage_error(self):
        self.assertEqual(run("doctor", "--no-such-flag").returncode, 2)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a, rest = ap.parse_known_args()
    BIN = a.bin
    unittest.main(argv=[sys.argv[0]] + rest)
