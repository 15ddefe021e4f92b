"""An HF-layout K3 checkpoint directory (k3-model.md section 7).

`config.json` plus either `model.safetensors` or shards listed by
`model.safetensors.index.json` (`weight_map`: tensor name -> shard file).
"""
import json
import os

import numpy as np

from . import mxfp4
from .config import load_config
from .safetensors import SafetensorsFile, widen

PREFIX = "language_model.model."
HEAD = "language_model.lm_head.weight"


class Checkpoint:
    def __init__(self, model_dir):
        self.dir = model_dir
        self.config = load_config(model_dir)
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        self.files = {}
        self.where = {}  # tensor name -> SafetensorsFile
        if os.path.exists(index):
            with open(index) as f:
                wm = json.load(f)["weight_map"]
            for name, fn in wm.items():
                if fn not in self.files:
                    self.files[fn] = SafetensorsFile(os.path.join(model_dir, fn))
                if name not in self.files[fn].entries:
                    raise ValueError("%s: index maps %s to %s, which does not hold it" % (index, name, fn))
                self.where[name] = self.files[fn]
        elif os.path.exists(single):
            st = SafetensorsFile(single)
            self.files["model.safetensors"] = st
            for name in st.names():
                self.where[name] = st
        else:
            raise FileNotFoundError("%s: neither model.safetensors nor model.safetensors.index.json" % model_dir)

    def has(self, name):
        return name in self.where

    def info(self, name):
        return self.where[name].info(name)

    def tensor(self, name):
        """A tensor widened exactly to float64 (U8 stays uint8). Name is the full name."""
        if name not in self.where:
            raise KeyError("%s: missing tensor %s" % (self.dir, name))
        st = self.where[name]
        return widen(st.raw(name), st.entries[name][0])

    def model(self, suffix):
        """Tensor `language_model.model.<suffix>` as float64."""
        return self.tensor(PREFIX + suffix)

    def expert_matrix(self, layer, e, w):
        """Routed expert `w` in {'w1','w2','w3'} of layer `layer` as float64 [out][in].

        MXFP4 (`weight_packed` + `weight_scale`, section 8) or unquantized `.weight`.
        """
        base = PREFIX + "layers.%d.block_sparse_moe.experts.%d.%s." % (layer, e, w)
        if self.has(base + "weight_packed"):
            return mxfp4.dequantize(self.tensor(base + "weight_packed"), self.tensor(base + "weight_scale"))
        return np.asarray(self.tensor(base + "weight"), dtype=np.float64)
