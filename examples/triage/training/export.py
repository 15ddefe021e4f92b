"""From the trained PyTorch model to a K3 checkpoint directory, and back.

write_checkpoint() stores the weights in the released layout with make_model's writer
(tests/reference/make_model.py): BF16 big matrices, F32 norms, conv, gates, router and
residual vectors, MXFP4 routed experts quantized by k3ref.mxfp4.quantize (the release's
rule), and the model's tokenizer files. It checks that every stored value is exactly the
value the training forward pass used (BF16 and MXFP4 rounding were simulated in training).

load_checkpoint() puts a checkpoint's stored values (read by the numpy reference's reader)
into a K3 module, for the PyTorch forward pass on exactly the weights the engine runs.
"""
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "reference"))
sys.path.insert(0, REF)

import make_model  # noqa: E402
from k3ref import Checkpoint, mxfp4  # noqa: E402
from k3_torch import bf16_round, mxfp4_round  # noqa: E402

PREFIX = make_model.PREFIX
HEAD = make_model.HEAD


def spec_of(dims):
    return make_model.Spec(
        hidden=dims.hidden, layers=dims.layers, vocab=dims.vocab, kda_heads=dims.kda_heads,
        kda_head_dim=dims.kda_head_dim, conv_kernel=dims.conv_kernel, heads=dims.heads,
        q_lora=dims.q_lora, kv_lora=dims.kv_lora, nope=dims.nope, rope=dims.rope, v_dim=dims.v_dim,
        experts_n=dims.experts_n, top_k=dims.top_k, shared=dims.shared, latent=dims.latent,
        moe_inter=dims.moe_inter, dense_inter=dims.dense_inter, dense_layers=dims.dense_layers,
        block_size=dims.block_size, full_attn_layers=list(dims.full_attn_layers), experts="mxfp4",
        trunk="bf16", a_log_len=0, tokenizer=True, gate_lower_bound=dims.gate_lower_bound)


def full_name(name):
    return HEAD if name == "lm_head.weight" else PREFIX + name


def checkpoint_values(model):
    """{checkpoint tensor name: array}: floats for dense tensors (the writer rounds BF16 ones
    to nearest even, as bf16_round does), uint8 for MXFP4 packed codes and scales."""
    values = {}
    for name, t in model.named_weights():
        w = t.detach().double().numpy()
        if ".experts." in name:
            layer_pre, which = name.rsplit(".", 1)                    # ...block_sparse_moe.experts, w1
            for e in range(w.shape[0]):
                packed, scale = mxfp4.quantize(w[e])
                if not np.array_equal(mxfp4.dequantize(packed, scale),
                                      mxfp4_round(t[e].detach()).double().numpy()):
                    raise AssertionError("%s[%d]: MXFP4 quantizer and training rounding differ" % (name, e))
                base = "%s%s.%d.%s." % (PREFIX, layer_pre, e, which)
                values[base + "weight_packed"] = packed
                values[base + "weight_scale"] = scale
        else:
            values[full_name(name)] = w
    return values


def write_checkpoint(model, out):
    """Writes the model into `out` (replaced) through `out`.partial; returns make_model's summary."""
    partial = out + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    spec = spec_of(model.d)
    summary = make_model.write_model(spec, partial, values=checkpoint_values(model))
    if summary["vocab"] != model.d.vocab:
        raise AssertionError("tokenizer vocabulary %d, model %d" % (summary["vocab"], model.d.vocab))
    ck = Checkpoint(partial)
    for name, t in model.named_weights():                             # stored = trained-on values
        if ".experts." in name:
            continue
        dtype = ck.info(full_name(name))[0]
        if (dtype == "BF16") != (name in model._big):
            raise AssertionError("%s: stored as %s, trained as %s" % (name, dtype, "BF16" if name in model._big else "F32"))
        want = bf16_round(t) if dtype == "BF16" else t.detach()
        if not np.array_equal(ck.tensor(full_name(name)), want.double().numpy()):
            raise AssertionError("%s: stored value differs from the trained one" % name)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)
    return summary


def load_checkpoint(model, model_dir):
    """Sets every parameter of `model` to the checkpoint's stored value (exact: BF16 and MXFP4
    values are float32 numbers) and turns simulated rounding off."""
    ck = Checkpoint(model_dir)
    with torch.no_grad():
        for name, t in model.named_weights():
            if ".experts." in name:
                layer_pre, which = name.rsplit(".", 1)
                L = int(layer_pre.split(".")[1])
                for e in range(t.shape[0]):
                    t[e] = torch.from_numpy(ck.expert_matrix(L, e, which).astype(np.float32))
            else:
                t.copy_(torch.from_numpy(ck.tensor(full_name(name)).astype(np.float32)).reshape(t.shape))
    model.fake_quant = False
    return model
