#!/usr/bin/python3
"""Writes the seed corpora tests/fuzz/corpus/<parser>/seed-* from the project's own fixtures
(golden models, examples, test data) and small hand-made files. Inputs that a fuzzer found
(crash-*, timeout-*, ...) live in the same directories and are never touched here.

  /usr/bin/python3 tests/fuzz/make_seeds.py --nightjar build/runner/nightjar \
      --tokenizer build/tests/k3_tokenizer

--nightjar writes the pack manifest seed (`nightjar pack` on a copy of tests/golden/
tiny-mxfp4 whose files have the modification time fuzz_pack_manifest.cpp gives its copy);
--tokenizer is the test tokenizer the build generates (tests/reference/k3_tokenizer_gen.py).
"""
import argparse
import base64
import glob
import json
import os
import shutil
import struct
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
FIXED_MTIME_S = 1000000000  # fuzz_pack_manifest.cpp: kFixedMtimeS


def write(parser, name, data):
    d = os.path.join(CORPUS, parser)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, nbytes)]; data is 0x3f bytes."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"\x3f" * offset


def seeds_safetensors():
    write("safetensors", "f32-bf16", safetensors(
        [("model.embed_tokens.weight", "F32", [4, 2], 32), ("model.norm.weight", "BF16", [2], 4)],
        {"format": "pt"}))
    write("safetensors", "mxfp4-like", safetensors(
        [("w.weight_packed", "U8", [2, 16], 32), ("w.weight_scale", "U8", [2, 1], 2),
         ("b", "F16", [3], 6), ("i", "I32", [1, 1, 2], 8)], None, pad=False))
    write("safetensors", "empty-header", safetensors([], {}))


def seeds_safetensors_index():
    # The shards fuzz_safetensors_index.cpp writes: embed (6) + norm (2) | lm_head (4).
    wm = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
          "model.norm.weight": "model-00001-of-00002.safetensors",
          "lm_head.weight": "model-00002-of-00002.safetensors"}
    write("safetensors_index", "both-shards", json.dumps({"metadata": {"total_size": 48}, "weight_map": wm}, indent=1))
    one = {k: v for k, v in wm.items() if v.endswith("00001-of-00002.safetensors")}
    write("safetensors_index", "one-shard", json.dumps({"weight_map": one}))


def seeds_config():
    for name in ["tiny-mxfp4", "tiny-bf16-flat"]:
        write("config", name, read("tests/golden/%s/config.json" % name))


def seeds_job_spec():
    write("job_spec", "stories", read("examples/stories/stories.yaml"))
    triage = read("examples/triage/triage.yaml").decode().replace("tickets/*.txt", "docs/*.txt")
    write("job_spec", "triage-glob", triage)
    write("job_spec", "classify-jsonl", """name: c
model: m
kind: classify
template: "Doc: {document} Labels {labels}. Label:"
labels: [a, b c]
inputs: {jsonl: docs.jsonl, id_field: id, text_field: text}
""")
    write("job_spec", "classify-items", """name: c2
model: m
kind: classify
memory: 1GiB
template: "{{x}} {document}"
labels: [yes, no]
items:
  - {id: one, document: "first"}
  - {id: two, document: "second"}
""")
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/schema/bad/*.yaml"))):
        write("job_spec", "bad-" + os.path.basename(path)[:-5], read(path))


def seeds_state_file():
    head = read("tests/unit/state/data/v1/state.bin")
    seg = read("tests/unit/state/data/v1/state.bin.seg-bebcfa883c4f1246")
    # Mode 1 (repair checksums; the fixture's are already right) and mode 0 (as written).
    write("state_file", "v1-repair", bytes([1]) + struct.pack("<I", len(head)) + head + seg)
    write("state_file", "v1-asis", bytes([0]) + struct.pack("<I", len(head)) + head + seg)


def seeds_tiktoken(tokenizer_dir):
    lines = [base64.b64encode(bytes([b])).decode() + " " + str(b) for b in range(256)]
    extra = [b"th", b"he", b"the", b" the", b"\xe2\x80", b"in"]
    lines += [base64.b64encode(t).decode() + " " + str(256 + i) for i, t in enumerate(extra)]
    write("tiktoken", "bytes-and-merges", "\n".join(lines) + "\n")
    write("tiktoken", "crlf-blank", "\r\n".join(lines[:256]) + "\r\n\r\n")
    if tokenizer_dir:
        with open(os.path.join(tokenizer_dir, "tiktoken.model"), "rb") as f:
            head = f.read().split(b"\n")[:400]
        write("tiktoken", "k3-test-vocab-head", b"\n".join(head) + b"\n")


def seeds_tokenizer_config(tokenizer_dir):
    write("tokenizer_config", "minimal", json.dumps({
        "added_tokens_decoder": {"300": {"content": "[BOS]", "special": True},
                                 "301": {"content": "<|close|>", "special": True}},
        "bos_token": "[BOS]", "eos_token": {"content": "<|close|>"}}))
    if tokenizer_dir:
        with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "rb") as f:
            write("tokenizer_config", "k3-test-vocab", f.read())


def seeds_pack_manifest(nightjar):
    if not nightjar:
        return
    with tempfile.TemporaryDirectory() as d:
        for f in ["config.json", "model.safetensors"]:
            shutil.copy(os.path.join(ROOT, "tests/golden/tiny-mxfp4", f), d)
            os.utime(os.path.join(d, f), ns=(FIXED_MTIME_S * 10**9, FIXED_MTIME_S * 10**9))
        subprocess.run([nightjar, "pack", d], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "nightjar-trunk.manifest.json"), "rb") as f:
            write("pack_manifest", "tiny-mxfp4", f.read())


def seeds_openai_batch():
    text = read("tests/cli/data/openai_batch_input.jsonl")
    write("openai_batch", "cli-data", text)
    for i, line in enumerate(l for l in text.split(b"\n") if l.strip()):
        write("openai_batch", "line-%d" % (i + 1), line + b"\n")


def seeds_classify_template():
    write("classify_template", "triage", "billing|bug|feature request|other\n"
          "You are a support assistant. Classify the support ticket as one of: {labels}.\n"
          "Answer with the label only.\nTicket: {document}\nLabel:\n")
    write("classify_template", "braces", "yes|no\n{{literal}} {labels} -> {document} }} {{\n")
    write("classify_template", "document-only", "\n{document}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nightjar", help="the nightjar binary (for the pack manifest seed)")
    ap.add_argument("--tokenizer", help="the test tokenizer directory (build/tests/k3_tokenizer)")
    a = ap.parse_args()
    seeds_safetensors()
    seeds_safetensors_index()
    seeds_config()
    seeds_job_spec()
    seeds_state_file()
    seeds_tiktoken(a.tokenizer)
    seeds_tokenizer_config(a.tokenizer)
    seeds_pack_manifest(a.nightjar)
    seeds_openai_batch()
    seeds_classify_template()


if __name__ == "__main__":
    main()
