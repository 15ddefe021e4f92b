#!/usr/bin/env python3
"""Tests of the numpy reference, the model generator and the golden fixtures.

  /usr/bin/python3 tests/reference/test_reference.py [-v]

The comparison with the outside conformance fixtures runs only when NJ_CONFORMANCE_DIR
names them (e.g. ../shared/conformance); the suite never reads outside the repository.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_golden  # noqa: E402
import make_model  # noqa: E402
from k3ref import K3Model, Checkpoint, mxfp4, prng  # noqa: E402
from k3ref import model as M  # noqa: E402
from k3ref.config import ConfigError, parse_config  # noqa: E402
from k3ref.safetensors import (SafetensorsError, SafetensorsFile, bf16_bits_to_f32,  # noqa: E402
                               f32_to_bf16_bits, write_file)

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
# The outside fixtures are an opt-in cross-check (the suite itself never reads outside the
# repository): NJ_CONFORMANCE_DIR=../shared/conformance /usr/bin/python3 test_reference.py
CONFORMANCE = os.environ.get("NJ_CONFORMANCE_DIR", "/nonexistent/nightjar-conformance")
GOLDEN = make_golden.GOLDEN_DIR
PY = sys.executable


def load_json(path):
    with open(path) as f:
        return json.load(f)


def tiny_spec(**kw):
    return make_model.Spec(**dict(make_model.PRESETS["tiny"], **kw))


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="nj-ref-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- safetensors

class SafetensorsTest(TempDir):
    def test_round_trip_all_dtypes(self):
        f32 = np.array([[1.5, -2.25, 3e-3], [0.0, -0.0, 1e6]], dtype=np.float32)
        f16 = np.array([0.5, -1.0, 65504.0], dtype=np.float16)
        bf = np.array([1.0, -3.140625, 2.0 ** -20], dtype=np.float64)  # exactly representable
        u8 = np.arange(12, dtype=np.uint8).reshape(3, 4)
        for align in (1, 8):
            p = os.path.join(self.tmp, "a%d.safetensors" % align)
            write_file(p, [("a", "F32", f32), ("b", "F16", f16), ("c", "BF16", bf), ("d", "U8", u8)],
                       metadata={"format": "pt"}, align=align)
            st = SafetensorsFile(p)
            self.assertEqual(st.names(), ["a", "b", "c", "d"])          # header order = data order
            self.assertEqual(st.metadata, {"format": "pt"})
            np.testing.assert_array_equal(st.get("a"), f32.astype(np.float64))
            np.testing.assert_array_equal(st.get("b"), f16.astype(np.float64))
            np.testing.assert_array_equal(st.get("c"), bf)
            np.testing.assert_array_equal(st.get("d"), u8)
            self.assertEqual(st.info("d"), ("U8", (3, 4)))
            if align == 8:
                self.assertEqual(st.data_start % 8, 0)
            offs = [st.entries[n][2:] for n in st.names()]
            self.assertEqual(offs[0][0], 0)
            for (b0, e0), (b1, _) in zip(offs, offs[1:]):
                self.assertEqual(e0, b1)                                    # contiguous, in order

    def test_bf16_rounding_is_nearest_even(self):
        bits = lambda x: int(np.array([x], np.float32).view(np.uint32)[0])
        one = bits(1.0)                                  # 0x3F800000
        cases = [(one, 0x3F80), (one + 0x7FFF, 0x3F80), (one + 0x8000, 0x3F80),  # tie -> even
                 (one + 0x8001, 0x3F81), (one + 0x18000, 0x3F82),             # tie -> even (up)
                 (bits(-2.0), 0xC000)]
        for b, want in cases:
            x = np.array([b], dtype=np.uint32).view(np.float32)
            self.assertEqual(int(f32_to_bf16_bits(x)[0]), want, hex(b))
        self.assertEqual(float(bf16_bits_to_f32(np.array([0x3FC0], np.uint16))[0]), 1.5)

    def test_rejects_inconsistent_offsets(self):
        p = os.path.join(self.tmp, "bad.safetensors")
        hdr = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}).encode()
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(hdr)) + hdr + bytes(16))
        with self.assertRaises(SafetensorsError):
            SafetensorsFile(p)


# ----------------------------------------------------------------------------- PRNG

class PrngTest(unittest.TestCase):
    def test_known_values(self):
        self.assertEqual(prng.fnv1a64(b""), 0xCBF29CE484222325)
        self.assertEqual(prng.fnv1a64(b"a"), 0xAF63DC4C8601EC8C)
        # splitmix64 seeded with 0: first outputs of the reference implementation
        self.assertEqual([int(v) for v in prng.splitmix64(0, 0, 2)],
                         [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4])

    def test_chunking_does_not_change_values(self):
        key = prng.tensor_key(7, "x")
        whole = prng.u64(key, 1000)
        old = prng.CHUNK
        try:
            prng.CHUNK = 64
            np.testing.assert_array_equal(prng.u64(key, 1000), whole)
        finally:
            prng.CHUNK = old
        np.testing.assert_array_equal(prng.splitmix64(key, 500, 10), whole[500:510])

    def test_distributions(self):
        x = prng.normal(prng.tensor_key(1, "n"), 200000, 2.0)
        self.assertLess(abs(x.mean()), 0.02)
        self.assertLess(abs(x.std() - 2.0), 0.02)
        u = prng.uniform(prng.tensor_key(1, "u"), 100000, -1.0, 3.0)
        self.assertTrue(u.min() >= -1.0 and u.max() < 3.0)
        self.assertLess(abs(u.mean() - 1.0), 0.02)
        b = prng.random_bytes(prng.tensor_key(1, "b"), 100003)
        self.assertEqual(len(b), 100003)
        self.assertLess(abs(np.bincount(b, minlength=256) - 100003 / 256).max(), 120)

    def test_generator_is_deterministic_and_per_tensor(self):
        with tempfile.TemporaryDirectory() as d:
            a, b, c = (os.path.join(d, n) for n in "abc")
            make_model.write_model(tiny_spec(), a, seed=5)
            make_model.write_model(tiny_spec(), b, seed=5)
            with open(os.path.join(a, "model.safetensors"), "rb") as fa, \
                    open(os.path.join(b, "model.safetensors"), "rb") as fb:
                self.assertEqual(fa.read(), fb.read())
            # unrelated sizes change: a tensor's bytes do not
            make_model.write_model(tiny_spec(vocab=300, experts_n=6, dense_inter=64), c, seed=5)
            sa, sc = Checkpoint(a), Checkpoint(c)
            for n in ("layers.2.self_attn.q_proj.weight", "layers.1.block_sparse_moe.experts.3.w2.weight_packed",
                      "layers.3.self_attn.kv_b_proj.weight", "norm.weight"):
                full = "language_model.model." + n
                np.testing.assert_array_equal(sa.where[full].raw(full), sc.where[full].raw(full))
            # and a different seed gives different values
            make_model.write_model(tiny_spec(), c, seed=6, force=True)
            n = "language_model.model.layers.2.self_attn.q_proj.weight"
            self.assertFalse(np.array_equal(Checkpoint(c).tensor(n), sa.tensor(n)))


# ----------------------------------------------------------------------------- MXFP4

class Mxfp4Test(unittest.TestCase):
    def test_table_and_nibble_order(self):
        self.assertEqual(list(mxfp4.E2M1[:8]), [0, .5, 1, 1.5, 2, 3, 4, 6])
        self.assertTrue(np.signbit(mxfp4.E2M1[8]))                   # code 8 is -0
        w = mxfp4.dequantize(np.array([[0x71] + [0] * 15], np.uint8), np.array([[127]], np.uint8))
        self.assertEqual((w[0, 0], w[0, 1]), (0.5, 6.0))               # low nibble first
        w = mxfp4.dequantize(np.array([[0xF9] + [0] * 15], np.uint8), np.array([[129]], np.uint8))
        self.assertEqual((w[0, 0], w[0, 1]), (-2.0, -24.0))            # 2^(129-127) = 4

    def test_pack_round_trip_and_scale_255(self):
        codes = prng.random_bytes(prng.tensor_key(3, "c"), 8 * 64).reshape(8, 64) & 0x0F
        packed = mxfp4.pack_codes(codes)
        np.testing.assert_array_equal(mxfp4.unpack_codes(packed), codes)
        scale = np.array([[120, 255]] * 8, dtype=np.uint8)
        scale[3] = [255, 130]
        w = mxfp4.dequantize(packed, scale)
        self.assertTrue(np.all(w[:, 32:][np.arange(8) != 3] == 0))     # NaN-scale blocks give 0
        self.assertTrue(np.all(w[3, :32] == 0))
        np.testing.assert_array_equal(w[0, :32], mxfp4.E2M1[codes[0, :32]] * 2.0 ** -7)
        x = prng.normal(prng.tensor_key(3, "x"), 64, 1.0)
        np.testing.assert_allclose(mxfp4.matvec_blocked(packed, scale, x), w @ x, rtol=1e-13, atol=1e-13)

    def test_quantize_follows_the_release_rule(self):
        # amax 6: p = 4, scale 1; ties go to the even code, past 6 saturates, sign bit for w < 0
        row = [6, 5, 3.5, 2.5, 1.75, 1.25, 0.75, 0.25, -1, 0, 5.9, -6.5] + [0] * 20
        packed, scale = mxfp4.quantize(np.array([row]))
        self.assertEqual(scale.tolist(), [[127]])
        self.assertEqual(mxfp4.unpack_codes(packed)[0, :12].tolist(),
                         [7, 6, 6, 4, 4, 2, 2, 0, 10, 0, 7, 15])
        # amax's mantissa >= 1.75 rounds its power of two up: 7 = 1.75 * 4 -> p = 8, scale 2
        for amax, code in ((7.0, 128), (6.99, 127), (0.4375, 124), (0.43, 123), (0.0, 0)):
            _, s = mxfp4.quantize(np.array([[amax] + [0.0] * 31]))
            self.assertEqual(int(s[0, 0]), code, amax)

    def test_quantize_round_trips_representable_weights_and_bounds_the_error(self):
        codes = prng.random_bytes(prng.tensor_key(5, "q"), 16 * 128).reshape(16, 128) & 0x0F
        codes[:, ::32] = 7                                             # every block reaches 6
        scale = (120 + prng.random_bytes(prng.tensor_key(5, "s"), 16 * 4) % 12).reshape(16, 4)
        w = mxfp4.dequantize(mxfp4.pack_codes(codes), scale.astype(np.uint8))
        p, s = mxfp4.quantize(w)
        np.testing.assert_array_equal(mxfp4.dequantize(p, s), w)
        x = prng.normal(prng.tensor_key(5, "w"), 16 * 128, 0.05).reshape(16, 128)
        p, s = mxfp4.quantize(x)
        deq = mxfp4.dequantize(p, s)
        step = mxfp4.block_scales(s).repeat(32, axis=1)               # the grid's largest half-gap
        self.assertTrue(np.all(np.abs(deq - x) <= step))
        p2, s2 = mxfp4.quantize(deq)
        np.testing.assert_array_equal(mxfp4.dequantize(p2, s2), deq)   # idempotent

    def test_generated_experts_have_zero_blocks_and_all_codes(self):
        g = make_model.Gen(1, tiny_spec())
        s = g.mxfp4_scale("s", 64, 64 * 8)
        frac = np.mean(s == 255)
        self.assertTrue(0.01 < frac < 0.06, frac)                     # p255 = 1/32 in tiny
        ok = s[s != 255]
        self.assertEqual(set(np.unique(ok)), {g.e8m0_base(512) + d for d in (-1, 0, 1)})
        codes = mxfp4.unpack_codes(g.mxfp4_packed("p", 64, 64))
        self.assertEqual(len(np.unique(codes)), 16)


# ----------------------------------------------------------------------------- config

class ConfigTest(unittest.TestCase):
    def test_nested_and_flat_agree(self):
        sp = tiny_spec()
        n = parse_config(make_model.make_config(sp, "nested"))
        f = parse_config(make_model.make_config(sp, "flat"))
        self.assertEqual((n.form, f.form), ("nested", "flat"))
        for k in vars(n):
            if k not in ("form",):
                self.assertEqual(getattr(n, k), getattr(f, k), k)
        self.assertEqual(n.layer_kinds(), "KKKMKKKMKKKMM")              # one-based list
        self.assertTrue(n.experts_quantized)

    def test_missing_key_is_named(self):
        cfg = make_model.make_config(tiny_spec(), "nested")
        del cfg["text_config"]["linear_attn_config"]["head_dim"]
        with self.assertRaisesRegex(ConfigError, "text_config.linear_attn_config.head_dim"):
            parse_config(cfg)
        cfg = make_model.make_config(tiny_spec(), "flat")
        del cfg["kda_num_heads"]
        with self.assertRaisesRegex(ConfigError, "kda_num_heads"):
            parse_config(cfg)
        cfg = make_model.make_config(tiny_spec(), "flat")
        del cfg["moe_intermediate_size"]
        with self.assertRaisesRegex(ConfigError, "moe_intermediate_size"):
            parse_config(cfg)


# ----------------------------------------------------------------------------- layout, shards

class LayoutTest(TempDir):
    def test_sharding_and_index(self):
        single, sharded = os.path.join(self.tmp, "one"), os.path.join(self.tmp, "three")
        make_model.write_model(tiny_spec(), single, seed=9)
        make_model.write_model(tiny_spec(), sharded, seed=9, shard_bytes=1_300_000)
        files = sorted(f for f in os.listdir(sharded) if f.endswith(".safetensors"))
        self.assertEqual(files, ["model-%05d-of-00003.safetensors" % i for i in (1, 2, 3)])
        idx = load_json(os.path.join(sharded, "model.safetensors.index.json"))
        a, b = Checkpoint(single), Checkpoint(sharded)
        self.assertEqual(set(idx["weight_map"]), set(a.where))
        total = sum(st.entries[n][3] - st.entries[n][2] for st in b.files.values() for n in st.entries)
        self.assertEqual(idx["metadata"]["total_size"], total)
        for n in a.where:                                              # same bytes
            np.testing.assert_array_equal(a.where[n].raw(n), b.where[n].raw(n))
        for L in range(13):                                            # a layer never straddles
            shards = {fn for n, fn in idx["weight_map"].items() if ".layers.%d." % L in n}
            self.assertEqual(len(shards), 1, L)
        np.testing.assert_array_equal(K3Model(single).forward([1, 2, 3]), K3Model(sharded).forward([1, 2, 3]))

    def test_oversized_layer_splits_between_expert_groups(self):
        d = os.path.join(self.tmp, "split")
        make_model.write_model(tiny_spec(), d, seed=9, shard_bytes=150_000)
        ck = Checkpoint(d)
        self.assertGreater(len(ck.files), 13)
        for L in range(1, 13):
            for e in range(8):
                pre = "language_model.model.layers.%d.block_sparse_moe.experts.%d." % (L, e)
                files = {ck.where[pre + w + s].path for w in ("w1", "w2", "w3")
                         for s in (".weight_packed", ".weight_scale")}
                self.assertEqual(len(files), 1)

    def test_layer_order_trunk_then_expert_runs(self):
        d = os.path.join(self.tmp, "m")
        make_model.write_model(tiny_spec(), d, seed=1)
        st = Checkpoint(d).files["model.safetensors"]
        names = st.names()                                             # in data order
        for L in (1, 5):
            pre = "language_model.model.layers.%d." % L
            idx = [i for i, n in enumerate(names) if n.startswith(pre)]
            self.assertEqual(idx, list(range(idx[0], idx[-1] + 1)))     # one contiguous run
            layer = [names[i][len(pre):] for i in idx]
            first_expert = next(i for i, n in enumerate(layer) if ".experts." in n)
            self.assertFalse(any(".experts." in n for n in layer[:first_expert]))
            want = ["block_sparse_moe.experts.%d.%s.%s" % (e, w, s) for e in range(8)
                    for w in ("w1", "w2", "w3") for s in ("weight_packed", "weight_scale")]
            self.assertEqual(layer[first_expert:], want)
        self.assertEqual(st.info("language_model.model.layers.0.self_attn.A_log"), ("F32", (16,)))

    def test_given_values_are_written_in_the_same_layout(self):
        spec = tiny_spec(layers=4, full_attn_layers=[4])
        make_model.write_model(spec, os.path.join(self.tmp, "gen"), seed=4)
        ck = Checkpoint(os.path.join(self.tmp, "gen"))
        values = {n: ck.tensor(n) for n in ck.where}
        make_model.write_model(spec, os.path.join(self.tmp, "val"), seed=99, values=values)
        with open(os.path.join(self.tmp, "gen", "model.safetensors"), "rb") as a, \
                open(os.path.join(self.tmp, "val", "model.safetensors"), "rb") as b:
            self.assertEqual(a.read(), b.read())                       # the seed played no part
        name = "language_model.model.norm.weight"
        bad = dict(values, **{name: np.zeros(3)})
        with self.assertRaisesRegex(ValueError, "norm.weight: value of shape \\(3,\\)"):
            make_model.write_model(spec, os.path.join(self.tmp, "bad"), values=bad)
        del bad[name]
        with self.assertRaisesRegex(ValueError, "no value for tensor .*norm.weight"):
            make_model.write_model(spec, os.path.join(self.tmp, "bad"), force=True, values=bad)
        with self.assertRaisesRegex(ValueError, "outside the layout: x"):
            make_model.write_model(spec, os.path.join(self.tmp, "bad"), force=True,
                                   values=dict(values, x=np.zeros(1)))

    @unittest.skipUnless(os.path.isdir(os.path.join(CONFORMANCE, "k3-tiny")), "NJ_CONFORMANCE_DIR not set")
    def test_tiny_matches_the_conformance_header(self):
        """Same tensor names, dtypes and shapes as the independent k3-tiny fixture."""
        d = os.path.join(self.tmp, "m")
        make_model.write_model(tiny_spec(), d, seed=1)
        ours = Checkpoint(d)
        ref = SafetensorsFile(os.path.join(CONFORMANCE, "k3-tiny", "model.safetensors"))
        self.assertEqual(sorted(ours.where), sorted(ref.names()))
        for n in ref.names():
            self.assertEqual(ours.info(n), ref.info(n), n)
        mine = load_json(os.path.join(d, "config.json"))
        theirs = load_json(os.path.join(CONFORMANCE, "k3-tiny", "config.json"))
        self.assertEqual(mine, theirs)


# ----------------------------------------------------------------------------- the math

class MathTest(unittest.TestCase):
    def test_attn_res_mixes_raw_sources(self):
        eps = 1e-5
        v1 = np.array([[3.0, 0.0, 0.0, 0.0]])
        v2 = np.array([[0.0, 1.0, 0.0, 0.0]])
        wn, wp = np.array([1.0, 2.0, 1.0, 1.0]), np.array([[1.0, 1.0, 0.0, 0.0]])
        # normed v1 = [2,0,0,0] (rms 1.5), normed v2 = [2,0,0,0]... scores use w = wn*wp = [1,2,0,0]
        s1 = 3.0 / np.sqrt(9 / 4 + eps) * 1.0
        s2 = 1.0 / np.sqrt(1 / 4 + eps) * 2.0
        p = np.exp([s1, s2]) / np.exp([s1, s2]).sum()
        np.testing.assert_allclose(M.attn_res([v1, v2], wn, wp, eps), p[0] * v1 + p[1] * v2, rtol=1e-14)

    def test_causal_conv_zero_history(self):
        x = np.array([[1.0], [10.0], [100.0]])
        w = np.array([[1000.0, 100.0, 10.0, 1.0]])                     # w[:, K-1] = current
        np.testing.assert_array_equal(M.causal_depthwise_conv(x, w)[:, 0], [1.0, 20.0, 300.0])

    def test_situ(self):
        g, u = np.array([-50.0, 0.5, 80.0]), np.array([100.0, -1.0, 2.0])
        want = 4 * np.tanh(g / 4) * (1 / (1 + np.exp(-g))) * 25 * np.tanh(u / 25)
        np.testing.assert_allclose(M.situ_glu(g, u, 4.0, 25.0), want, rtol=1e-14)
        self.assertLessEqual(np.abs(M.situ_glu(np.array([1e4]), np.array([1e4]), 4.0, 25.0)).max(), 100)

    def test_kda_scan_equals_closed_form(self):
        """S_t = (I - beta k k^T) diag(alpha_t) S_{t-1} + beta k v^T, o = S_t^T q (section 4)."""
        d = tempfile.mkdtemp()
        try:
            make_model.write_model(tiny_spec(), d, seed=4)
            m = K3Model(d)
            x = prng.normal(prng.tensor_key(0, "x"), 5 * 128, 1.0).reshape(5, 128)
            got = m.kda(0, x)
            # recompute with explicit matrices
            c, pre = m.cfg, "layers.0.self_attn."
            H, D, P = c.kda_num_heads, c.kda_head_dim, c.kda_num_heads * c.kda_head_dim
            br = lambda n: M.silu(M.causal_depthwise_conv(x @ m.w(pre + n + "_proj.weight").T,
                                                          m.w(pre + n + "_conv1d.weight")[:, 0, :]))
            q, k, v = (br(n).reshape(5, H, D) for n in "qkv")
            q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(D)
            k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
            beta = M.sigmoid(x @ m.w(pre + "b_proj.weight").T)
            z = (x @ m.w(pre + "f_a_proj.weight").T @ m.w(pre + "f_b_proj.weight").T + m.w(pre + "dt_bias"))
            A = np.exp(m.w(pre + "A_log")[:H])
            alpha = np.exp(-5.0 * M.sigmoid(A.repeat(D) * z)).reshape(5, H, D)
            o = np.zeros((5, H, D))
            for h in range(H):
                S = np.zeros((D, D))
                for t in range(5):
                    kk = k[t, h][:, None]
                    S = (np.eye(D) - beta[t, h] * kk @ kk.T) @ np.diag(alpha[t, h]) @ S \
                        + beta[t, h] * kk @ v[t, h][None, :]
                    o[t, h] = S.T @ q[t, h]
            o = M.rms_norm(o, m.w(pre + "o_norm.weight"), m.eps).reshape(5, P)
            o = o * M.sigmoid(x @ m.w(pre + "g_proj.weight").T)
            np.testing.assert_allclose(got, o @ m.w(pre + "o_proj.weight").T, rtol=1e-6, atol=1e-9)
        finally:
            shutil.rmtree(d)

    def test_mla_absorbed_form_equals_plain(self):
        d = tempfile.mkdtemp()
        try:
            make_model.write_model(tiny_spec(), d, seed=4)
            m = K3Model(d)
            c, pre, T = m.cfg, "layers.3.self_attn.", 6
            x = prng.normal(prng.tensor_key(0, "y"), T * 128, 1.0).reshape(T, 128)
            nh, dn, dr, dv, r = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, c.kv_lora_rank
            q = (M.rms_norm(x @ m.w(pre + "q_a_proj.weight").T, m.w(pre + "q_a_layernorm.weight"), m.eps)
                 @ m.w(pre + "q_b_proj.weight").T).reshape(T, nh, dn + dr)
            cc = x @ m.w(pre + "kv_a_proj_with_mqa.weight").T
            lat, kr = M.rms_norm(cc[:, :r], m.w(pre + "kv_a_layernorm.weight"), m.eps), cc[:, r:]
            wkv = m.w(pre + "kv_b_proj.weight").reshape(nh, dn + dv, r)
            o = np.zeros((T, nh, dv))
            for t in range(T):
                for h in range(nh):
                    q_abs = wkv[h, :dn].T @ q[t, h, :dn]                     # [r]
                    s = (lat[:t + 1] @ q_abs + kr[:t + 1] @ q[t, h, dn:]) / np.sqrt(dn + dr)
                    p = np.exp(s - s.max()); p /= p.sum()
                    o[t, h] = wkv[h, dn:] @ (p @ lat[:t + 1])
            o = o.reshape(T, nh * dv) * M.sigmoid(x @ m.w(pre + "g_proj.weight").T)
            np.testing.assert_allclose(m.mla(3, x), o @ m.w(pre + "o_proj.weight").T, rtol=1e-9, atol=1e-12)
        finally:
            shutil.rmtree(d)

    def test_router_ties_go_to_the_lower_index_and_bias_only_selects(self):
        d = tempfile.mkdtemp()
        try:
            make_model.write_model(tiny_spec(), d, seed=1)               # expert 7 copies 6
            m = K3Model(d)
            x = prng.normal(prng.tensor_key(0, "r"), 400 * 128, 1.0).reshape(400, 128)
            sel, ws, biased = m.route(1, x)
            np.testing.assert_array_equal(biased[:, 6], biased[:, 7])
            srt = -np.sort(-biased, axis=1)
            # 6 and 7 tie for the last slot (2nd and 3rd place): only the lower index may win
            boundary = (srt[:, 1] == biased[:, 6]) & (srt[:, 2] == biased[:, 6])
            self.assertGreater(boundary.sum(), 0)
            self.assertTrue(np.all(np.any(sel[boundary] == 6, axis=1)))
            self.assertFalse(np.any(sel[boundary] == 7))
            s = M.sigmoid(x @ m.w("layers.1.block_sparse_moe.gate.weight").T)
            un = np.take_along_axis(s, sel, axis=1)
            np.testing.assert_allclose(ws, un / un.sum(axis=1, keepdims=True), rtol=1e-14)
        finally:
            shutil.rmtree(d)


# ----------------------------------------------------------------------------- models, goldens

class ModelTest(TempDir):
    def test_expert_storage_does_not_change_the_function(self):
        """tiny (MXFP4) and tiny-bf16 hold the same expert values; tiny-f32 differs only in
        trunk rounding (F32 instead of BF16)."""
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        make_model.write_model(make_model.Spec(**make_model.PRESETS["tiny"]), a, seed=3)
        make_model.write_model(make_model.Spec(**make_model.PRESETS["tiny-bf16"]), b, seed=3,
                               config_form="flat", header_align=1)
        ids = [5, 4, 3, 2, 1, 0, 255]
        np.testing.assert_array_equal(K3Model(a).forward(ids), K3Model(b).forward(ids))

    def test_activations_stay_order_one(self):
        d = os.path.join(self.tmp, "m")
        make_model.write_model(make_model.Spec(**make_model.PRESETS["tiny"]), d, seed=1)
        m = K3Model(d)
        logits = m.forward(list(range(0, 256, 9)), collect_stats=True)
        for r in m.stats["rms"]:
            for k in ("attn", "ffn", "h"):
                self.assertTrue(0.1 < r[k] < 5.0, r)
        self.assertTrue(0.5 < logits.std() < 5.0)
        self.assertGreater(m.stats["min_route_gap"], 0)

    def test_forward_cli(self):
        d = os.path.join(self.tmp, "m")
        subprocess.run([PY, os.path.join(HERE, "make_model.py"), "--out", d, "--preset", "tiny",
                        "--seed", "2"], check=True, capture_output=True)
        p = subprocess.run([PY, os.path.join(HERE, "forward.py"), "--model", d, "--prompt-ids",
                            "3,7,11", "--max-tokens", "4", "--output", "json"],
                           check=True, capture_output=True, text=True)
        j = json.loads(p.stdout)
        self.assertEqual(len(j["output_ids"]), 4)
        self.assertEqual(len(j["argmax"]), 7)
        self.assertEqual(j["argmax"][2:6], j["output_ids"])
        self.assertEqual([len(r) for r in j["logits"]], [256] * 7)
        self.assertEqual(j["argmax"], [int(np.argmax(r)) for r in j["logits"]])

    def test_make_model_cli_errors(self):
        p = subprocess.run([PY, os.path.join(HERE, "make_model.py"), "--out", os.path.join(self.tmp, "x"),
                            "--hidden", "64"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--layers", p.stderr)
        d = os.path.join(self.tmp, "y")
        os.makedirs(d)
        open(os.path.join(d, "keep.txt"), "w").close()
        p = subprocess.run([PY, os.path.join(HERE, "make_model.py"), "--out", d, "--preset", "tiny",
                            "--force"], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertTrue(os.path.exists(os.path.join(d, "keep.txt")))


class TokenizerHookTest(TempDir):
    """--tokenizer calls k3_tokenizer_gen.write_tokenizer(out_dir) and uses its return value."""

    def test_vocab_comes_from_write_tokenizer(self):
        import types
        fake = types.ModuleType("k3_tokenizer_gen")
        calls = []

        def write_tokenizer(out_dir):
            calls.append(out_dir)
            with open(os.path.join(out_dir, "tiktoken.model"), "w") as f:
                f.write("QQ== 0\n")
            with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
                f.write("{}\n")
            return 300
        fake.write_tokenizer = write_tokenizer
        saved = sys.modules.get("k3_tokenizer_gen")
        sys.modules["k3_tokenizer_gen"] = fake
        try:
            d = os.path.join(self.tmp, "tok")
            make_model.write_model(tiny_spec(tokenizer=True), d, seed=1)
        finally:
            if saved is None:
                del sys.modules["k3_tokenizer_gen"]
            else:
                sys.modules["k3_tokenizer_gen"] = saved
        self.assertEqual(calls, [d])
        ck = Checkpoint(d)
        self.assertEqual(ck.config.vocab_size, 300)
        self.assertEqual(ck.info("language_model.model.embed_tokens.weight")[1], (300, 128))
        self.assertEqual(ck.info("language_model.lm_head.weight")[1], (300, 128))
        self.assertTrue(os.path.exists(os.path.join(d, "tiktoken.model")))

    @unittest.skipIf(os.path.exists(os.path.join(HERE, "k3_tokenizer_gen.py")), "the module exists")
    def test_missing_module_fails_clearly(self):
        d = os.path.join(self.tmp, "demo")
        p = subprocess.run([PY, os.path.join(HERE, "make_model.py"), "--out", d, "--preset", "demo"],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("k3_tokenizer_gen", p.stderr)
        self.assertFalse(os.path.exists(d))


class GoldenTest(unittest.TestCase):
    def test_goldens_agree_with_the_reference(self):
        for name, (args, prompt, n) in make_golden.FIXTURES.items():
            with self.subTest(name):
                d = os.path.join(GOLDEN, name)
                exp = load_json(os.path.join(d, "expected.json"))
                self.assertEqual(exp["prompt_ids"], prompt)
                self.assertGreaterEqual(len(prompt), 8)
                self.assertGreaterEqual(len(exp["greedy_ids"]), 16)
                self.assertGreaterEqual(exp["min_top2_margin"], 1e-3)
                full = prompt + exp["greedy_ids"]
                m = K3Model(d)
                logits = m.forward(full)
                self.assertEqual(exp["teacher_forced_argmax"], [int(i) for i in logits.argmax(1)])
                self.assertEqual(exp["greedy_ids"], [int(i) for i in logits.argmax(1)[len(prompt) - 1:-1]])
                np.testing.assert_allclose(np.array(exp["logits"]), logits, rtol=1e-6, atol=1e-6)
                # an fp32 run of the same code picks the same tokens everywhere
                l32 = K3Model(d, dtype=np.float32).forward(full)
                self.assertEqual(exp["teacher_forced_argmax"], [int(i) for i in l32.argmax(1)])
                self.assertLess(np.abs(l32 - logits).max(), exp["min_top2_margin"] / 4)
                size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
                self.assertLess(size, 4_200_000)


class GoldenCompareTest(TempDir):
    def test_compare_trees_reports_the_first_difference(self):
        copy = os.path.join(self.tmp, "golden")
        shutil.copytree(GOLDEN, copy)
        self.assertIsNone(make_golden.compare_trees(GOLDEN, copy))
        p = os.path.join(copy, "tiny-sharded", "model-00002-of-00003.safetensors")
        with open(p, "r+b") as f:
            f.seek(5000)
            b = f.read(1)
            f.seek(5000)
            f.write(bytes([b[0] ^ 1]))
        self.assertEqual(make_golden.compare_trees(copy, GOLDEN),
                         (os.path.join("tiny-sharded", "model-00002-of-00003.safetensors"), "content differs"))
        os.remove(p)
        self.assertIn("file lists differ", make_golden.compare_trees(copy, GOLDEN)[1])


@unittest.skipUnless(os.path.isdir(CONFORMANCE), "NJ_CONFORMANCE_DIR not set")
class ConformanceTest(unittest.TestCase):
    """The independent PyTorch fixtures (read only; never copied into the repository)."""
    TOL = 2e-4   # as ../shared/conformance/check

    def run_fixture(self, name):
        d = os.path.join(CONFORMANCE, name)
        exp = load_json(os.path.join(d, "expected.json"))
        m = K3Model(d)
        prompt, greedy = exp["prompt_ids"], exp["greedy_ids"]
        self.assertEqual(m.generate_greedy(prompt, len(greedy)), greedy)
        logits = m.forward(prompt + greedy)
        self.assertEqual([int(i) for i in logits.argmax(1)], exp["teacher_forced_argmax"])
        key = next(k for k in exp if k.startswith("logits_first"))
        rows = np.array(exp[key])
        diff = np.abs(logits[:len(rows), :rows.shape[1]] - rows).max()
        self.assertLess(diff, self.TOL)
        return m, exp, diff

    def test_k3_tiny(self):
        m, exp, diff = self.run_fixture("k3-tiny")
        want = np.array(exp["prompt_last_logits_bits"], dtype=np.uint32).view(np.float32)
        last = m.forward(exp["prompt_ids"])[-1]
        self.assertLess(np.abs(last - want).max(), self.TOL)

    def test_k3_oracle_f32(self):
        self.run_fixture("k3-oracle-f32")


if __name__ == "__main__":
    unittest.main()
