"""Text to token ids for training: rank BPE over a model directory's tiktoken.model.

Pieces come from the pre-tokenizer of tests/reference/k3_tokenizer_gen.py (an approximation
of K3's pattern, exact on the ASCII text this corpus is made of); each piece is merged by
rank, lowest first, as tiktoken does. train.py checks the ids against `nightjar tokenize`
on every evaluation ticket and a sample of the corpus before training, so the model is
trained on exactly the ids the engine will feed it.
"""
import base64
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "reference")))

import k3_tokenizer_gen  # noqa: E402


class Tokenizer:
    def __init__(self, model_dir):
        self.ranks = {}
        with open(os.path.join(model_dir, "tiktoken.model"), encoding="ascii") as f:
            for line in f:
                tok, rank = line.split()
                self.ranks[base64.b64decode(tok)] = int(rank)
        self.num_ranks = len(self.ranks)
        self._cache = {}

    def _piece(self, b):
        ids = self._cache.get(b)
        if ids is not None:
            return ids
        parts = [b[i:i + 1] for i in range(len(b))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        ids = [self.ranks[p] for p in parts]
        self._cache[b] = ids
        return ids

    def encode(self, text):
        """Ids of `text` (special-token names are plain text)."""
        out = []
        for piece in k3_tokenizer_gen.pre_tokenize(text):
            out.extend(self._piece(piece.encode("utf-8")))
        return out
