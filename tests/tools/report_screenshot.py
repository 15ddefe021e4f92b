#!/usr/bin/env python3
"""The HTML morning report in a real browser (issue 34): renders a report with headless
Chromium, takes a screenshot and checks what a person would see: the page is not blank, the
failed job's red and the label chart's green are drawn, and the DOM Chromium built holds the
summary, failures and review tables. Development only: exits 77 (skipped) without Chromium
(`deploy/install-deps.sh --browser` installs it).

    tests/tools/report_screenshot.py --bin build/runner/nightjar [--keep DIR]

It makes its own night: a classify job, a generate job and one whose model disappears, on a
generated model, then `nightjar report --out`, then `chromium --headless --screenshot`."""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

SKIP = 77
FAILED_RED = (0xC5, 0x30, 0x30)
LABEL_GREEN = (0x2F, 0x85, 0x5A)


def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def make_night(binary, work):
    model = njtest.make_model(os.path.join(work, "model"), preset="demo")
    nj = njtest.Nightjar(binary, os.path.join(work, "home"))
    docs = ["I was charged twice.", "The app crashes on start.", "Please add dark mode.", "Opening hours?"]
    spec = os.path.join(work, "tickets.yaml")
    with open(spec, "w") as f:
        f.write("name: tickets\nmodel: %s\nkind: classify\n" % json.dumps(model))
        f.write("template: %s\n" % json.dumps("Classify the ticket as one of: {labels}.\nTicket: {document}\nLabel:"))
        f.write('labels: ["other", "feature request", "urgent", "question"]\nitems:\n')
        f.writelines("  - {id: d%d, document: %s}\n" % (k, json.dumps(d)) for k, d in enumerate(docs))
    nj.submit(spec)
    nj.submit(njtest.write_spec(os.path.join(work, "ok.yaml"), "stories", model,
                                [{"id": "s%d" % k, "prompt_ids": [5 + k, 9], "max_tokens": 8} for k in range(3)]))
    gone = os.path.join(work, "model-gone")
    shutil.copytree(model, gone)
    nj.submit(njtest.write_spec(os.path.join(work, "bad.yaml"), "doomed", gone,
                                [{"id": "b0", "prompt_ids": [1], "max_tokens": 2}], max_attempts=1))
    shutil.rmtree(gone)
    nj.run("run", "--drain", "--threads", "1", "--retry-seconds", "0.05")
    html = os.path.join(work, "report.html")
    p = nj.run("report", "--out", html)
    assert p.returncode == 0, p.stderr
    return html


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--keep", help="keep the report and its screenshot in this directory")
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("report_screenshot: skipped: no chromium (deploy/install-deps.sh --browser)")
        return SKIP
    work = tempfile.mkdtemp(prefix="report-shot-", dir=os.environ.get("NJ_TEST_SCRATCH"))
    html = make_night(os.path.abspath(a.bin), work)
    png = os.path.join(work, "report.png")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1",
             "--user-data-dir=" + os.path.join(work, "profile")]
    shot = subprocess.run([chromium, *flags, "--window-size=1280,3000", "--screenshot=" + png, "file://" + html],
                          capture_output=True, text=True, timeout=120)
    assert os.path.exists(png), f"no screenshot: {shot.stderr[-2000:]}"
    dom = subprocess.run([chromium, *flags, "--dump-dom", "file://" + html], capture_output=True, text=True,
                         timeout=120).stdout
    for needle in ('id="summary"', 'id="failures"', 'class="review"', 'class="labels"', "doomed", "swatch-failed"):
        assert needle in dom, f"Chromium's DOM lacks {needle}"
    width, height, rows = png_pixels(png)
    colours = {}
    for row in rows:
        for px in row:
            colours[px] = colours.get(px, 0) + 1
    white = colours.get((255, 255, 255), 0)
    assert white < width * height * 0.995, "the page rendered blank"
    near = lambda want: sum(n for px, n in colours.items() if all(abs(px[i] - want[i]) <= 6 for i in range(3)))
    red, green = near(FAILED_RED), near(LABEL_GREEN)
    assert red > 50, f"the failed job's red is not drawn ({red} pixels)"
    assert green > 50, f"the label chart's bars are not drawn ({green} pixels)"
    print(f"report_screenshot: ok: {width}x{height}, {len(colours)} colours, {red} red and {green} green pixels, "
          f"{100 * white / (width * height):.1f}% white")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        shutil.copy(html, a.keep)
        shutil.copy(png, a.keep)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
