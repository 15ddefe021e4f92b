"""MXFP4 (compressed-tensors `mxfp4-pack-quantized`), k3-model.md section 8.

  weight_packed U8 [out][in/2]: byte j holds element 2j (low nibble), 2j+1 (high nibble)
  weight_scale  U8 [out][in/32]: E8M0 exponent s, block scale 2^(s-127);
                s = 255 (NaN) means the block contributes 0
  w[r][i] = E2M1[nibble] * 2^(scale[r][i/32] - 127)

quantize() writes that format from real weights with the release's rule (the
compressed-tensors quantizer): per 32-block, amax = max |w|; its power of two is rounded
up when amax's mantissa is >= 1.75, i.e. p = 2^floor(log2 amax), doubled when
amax >= 1.75 p; the block scale is p / 4 (code 127 + log2 p - 2), so |w| / scale < 7;
each w / scale is rounded to the nearest E2M1 magnitude (ties to the even code, values
past 6 saturate to 6), sign bit set for w < 0. An all-zero block gets scale code 0.
"""
import numpy as np

GROUP = 32
# E2M1 code -> value; bit 3 is the sign (code 8 is -0).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)
SCALE_NAN = 255


def unpack_codes(packed):
    """[out][in/2] uint8 -> [out][in] codes 0..15 (low nibble first)."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def pack_codes(codes):
    """[out][in] codes 0..15 -> [out][in/2] uint8 (element 2j low nibble, 2j+1 high)."""
    codes = np.asarray(codes, dtype=np.uint8)
    assert codes.shape[-1] % 2 == 0 and codes.max(initial=0) < 16
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def block_scales(scale):
    """E8M0 bytes -> float64 block scales 2^(s-127), with s = 255 -> 0 (block contributes 0).

    2^(s-127) for s in 0..254 is exact in float64 (ldexp, no rounding).
    """
    s = np.asarray(scale, dtype=np.int64)
    val = np.ldexp(1.0, s - 127)
    return np.where(s == SCALE_NAN, 0.0, val)


# Midpoints between adjacent E2M1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, and whether a value
# exactly on one rounds up (to the even code: 0.75 -> 1, 1.75 -> 2, 3.5 -> 4).
_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_TIE_UP = np.array([False, True, False, True, False, True, False])


def scale_codes(w):
    """E8M0 scale codes of float weights [out][in] (in % 32 == 0): the release's rule (module
    docstring). Exact: frexp gives the exponent and mantissa without rounding."""
    w = np.asarray(w, dtype=np.float64)
    out_dim, in_dim = w.shape
    if in_dim % GROUP:
        raise ValueError("MXFP4 needs the input width to be a multiple of %d, got %d" % (GROUP, in_dim))
    amax = np.abs(w).reshape(out_dim, in_dim // GROUP, GROUP).max(axis=-1)
    mant, exp = np.frexp(amax)                    # amax = mant * 2^exp, mant in [0.5, 1)
    log2_p = exp - 1 + (mant >= 0.875)            # mantissa in [1, 2) >= 1.75 rounds up
    codes = np.clip(127 + log2_p - 2, 0, 254)
    return np.where(amax == 0, 0, codes).astype(np.uint8)


def quantize(w):
    """Float weights [out][in] -> (weight_packed [out][in/2], weight_scale [out][in/32]) by the
    release's rule (module docstring). dequantize() of the result is w rounded to the format."""
    w = np.asarray(w, dtype=np.float64)
    scale = scale_codes(w)
    out_dim, in_dim = w.shape
    q = np.abs(w).reshape(out_dim, in_dim // GROUP, GROUP) / block_scales(scale)[:, :, None]
    mag = (np.sum(q[..., None] > _MIDPOINTS, axis=-1)
           + np.sum((q[..., None] == _MIDPOINTS) & _TIE_UP, axis=-1))   # 0..7
    codes = mag.reshape(out_dim, in_dim) + 8 * (w < 0)
    return pack_codes(codes), scale


# byte -> (value of the low nibble, value of the high nibble): decodes two codes at once
_PAIR = np.stack([E2M1[np.arange(256) & 0x0F], E2M1[np.arange(256) >> 4]], axis=1)  # [256, 2]


def dequantize(packed, scale):
    """weight_packed [out][in/2], weight_scale [out][in/32] -> float64 [out][in], exact.

    w[r][i] = E2M1[nibble i] * 2^(scale[r][i/32] - 127), and 0 for blocks with scale 255.
    """
    packed = np.asarray(packed, dtype=np.uint8)
    out_dim, in_dim = packed.shape[0], packed.shape[1] * 2
    if in_dim % GROUP or scale.shape != (out_dim, in_dim // GROUP):
        raise ValueError("MXFP4 shapes disagree: packed %s, scale %s" % (packed.shape, scale.shape))
    vals = _PAIR[packed].reshape(out_dim, in_dim // GROUP, GROUP)   # element 2j low, 2j+1 high
    return (vals * block_scales(scale)[:, :, None]).reshape(out_dim, in_dim)


def matvec_blocked(packed, scale, x):
    """y = W x computed the way section 8 recommends: per 32-block sum E2M1*x, then scale.

    Used by the tests to show it equals dequantize(...) @ x; float64 throughout.
    """
    codes = unpack_codes(packed)
    out_dim, in_dim = codes.shape
    blocks = E2M1[codes].reshape(out_dim, in_dim // GROUP, GROUP)
    partial = np.einsum("obg,bg->ob", blocks, np.asarray(x, dtype=np.float64).reshape(-1, GROUP))
    return (partial * block_scales(scale)).sum(axis=1)                 # [out]
