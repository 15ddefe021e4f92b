#!/usr/bin/env python3
"""k3_tokenizer_gen.py: deterministic output in the layout a K3 model directory carries
(tiktoken.model ranks 0..255 the single bytes, K3's 256 specials after the ranks)."""
import base64, json, os, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3_tokenizer_gen as gen  # noqa: E402


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Generator(unittest.TestCase):
    def test_same_inputs_give_byte_identical_files(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            self.assertEqual(gen.write_tokenizer(a, 500), gen.write_tokenizer(b, 500))
            for name in ("tiktoken.model", "tokenizer_config.json"):
                self.assertEqual(read(os.path.join(a, name)), read(os.path.join(b, name)), name)

    def test_layout_matches_k3(self):
        with tempfile.TemporaryDirectory() as d:
            size = gen.write_tokenizer(d, 1000)
            lines = read(os.path.join(d, "tiktoken.model")).decode().splitlines()
            self.assertEqual(size, 256 + 1000 + 256)
            self.assertEqual(len(lines), 256 + 1000)
            tokens = []
            for rank, line in enumerate(lines):
                b64, r = line.split(" ")
                self.assertEqual(int(r), rank)
                tokens.append(base64.b64decode(b64, validate=True))
            self.assertEqual(tokens[:256], [bytes([i]) for i in range(256)])
            self.assertEqual(len(set(tokens)), len(tokens), "token bytes are distinct")
            # Every merge is the concatenation of two earlier tokens.
            seen = set(tokens[:256])
            for t in tokens[256:]:
                self.assertTrue(any(t[:k] in seen and t[k:] in seen for k in range(1, len(t))), t)
                seen.add(t)

            config = json.loads(read(os.path.join(d, "tokenizer_config.json")))
            added = config["added_tokens_decoder"]
            self.assertEqual(sorted(int(k) for k in added), list(range(1256, 1512)))
            names = {v["content"]: int(k) for k, v in added.items()}
            # K3's chat control tokens (k3-model.md 9.1): 163586..163589 = 163584 + 2..5.
            self.assertEqual(config["eos_token"], "<|end_of_msg|>")
            for offset, name in enumerate(("<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>"), 2):
                self.assertEqual(names[name], 1256 + offset, name)
            self.assertIn("[BOS]", names)
            self.assertIn("[EOS]", names)
            unmarked = sorted(v["content"] for v in added.values() if not v["special"])
            self.assertEqual(unmarked, ["<|close|>", "<|sep|>"])
            self.assertNotIn("<|close|>", config["additional_special_tokens"])

    def test_learns_frequent_words_first(self):
        with tempfile.TemporaryDirectory() as d:
            gen.write_tokenizer(d, 3000)
            lines = read(os.path.join(d, "tiktoken.model")).decode().splitlines()
            tokens = [base64.b64decode(l.split(" ")[0]) for l in lines]
            self.assertIn(" the".encode(), tokens[:600])
            self.assertIn("的".encode(), tokens)

    def test_rejects_more_merges_than_the_sample_supports(self):
        with tempfile.TemporaryDirectory() as d, self.assertRaises(ValueError):
            gen.write_tokenizer(d, 10 ** 6)


if __name__ == "__main__":
    unittest.main()
