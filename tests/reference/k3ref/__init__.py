"""k3ref: Nightjar's independent float64 reference of the Kimi K3 forward pass.

Written to be read beside docs/k3-model.md (a copy lives in ../shared/docs); every
function names the section it implements. Only numpy and the standard library.

Modules:
  safetensors  reading and writing .safetensors files (header parsing done here)
  config       config.json in the nested (released) and flat (aliased) forms, section 1
  mxfp4        E2M1 / E8M0 decoding and packing, section 8
  checkpoint   an HF-layout checkpoint directory: single file or sharded with an index
  model        the forward pass, sections 2-6, in float64
  prng         counter-based splitmix64 PRNG used by make_model.py
"""
from .config import K3Config, ConfigError, load_config  # noqa: F401
from .checkpoint import Checkpoint  # noqa: F401
from .model import K3Model  # noqa: F401
