"""Counter-based PRNG for make_model.py: splitmix64 over (tensor key, element index).

Only integer arithmetic and correctly rounded IEEE float64 operations are used (no
numpy.random, no transcendental functions), so the bytes produced do not depend on the
numpy version or the machine. Each tensor has its own key, fnv1a64("<seed>:<name>"), so
its values depend only on the seed, its name and its own shape.
"""
import math

import numpy as np

MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
CHUNK = 1 << 22  # elements per vectorized step (bounds memory; does not affect values)


def fnv1a64(data):
    """64-bit FNV-1a of a bytes object."""
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK64
    return h


def tensor_key(seed, name):
    return fnv1a64(("%d:%s" % (seed, name)).encode("utf-8"))


def splitmix64(key, start, count):
    """Outputs start..start+count-1 of the stream `key`: mix(key + (i+1) * golden)."""
    i = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(key) + i * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def u64(key, n):
    """n raw 64-bit outputs (as uint64), generated in chunks."""
    out = np.empty(n, dtype=np.uint64)
    for s in range(0, n, CHUNK):
        out[s:s + CHUNK] = splitmix64(key, s, min(CHUNK, n - s))
    return out


# Irwin-Hall(4) of 16-bit uniforms: sum of the four 16-bit fields of one output.
_IH_MEAN = 2 * 65535
_IH_STD = math.sqrt(4 * (65536.0 ** 2 - 1) / 12.0)


def normal(key, n, std):
    """n approximately normal values (mean 0, standard deviation `std`), float64.

    Irwin-Hall with 4 terms: bell-shaped, bounded at about 3.46 std; exact integer sum,
    then one correctly rounded multiplication.
    """
    z = u64(key, n)
    m = np.uint64(0xFFFF)
    s = ((z & m) + ((z >> np.uint64(16)) & m) + ((z >> np.uint64(32)) & m) + (z >> np.uint64(48)))
    return (s.astype(np.int64) - _IH_MEAN).astype(np.float64) * (std / _IH_STD)


def uniform(key, n, lo, hi):
    """n uniform values in [lo, hi), float64 (53-bit mantissa from the top bits)."""
    z = u64(key, n)
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return lo + (hi - lo) * u


def random_bytes(key, n):
    """n uniformly random bytes (uint8), little-endian order of the 64-bit outputs."""
    z = u64(key, (n + 7) // 8)
    return z.astype("<u8").view(np.uint8)[:n]
