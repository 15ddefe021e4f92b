"""Reading and writing the safetensors format (no third-party library).

File layout: 8-byte little-endian unsigned header length N, then N bytes of UTF-8 JSON
(may be padded with trailing spaces), then the data section. Each header entry is
`name: {"dtype", "shape", "data_offsets": [begin, end]}` with offsets relative to the
start of the data section. An optional `__metadata__` entry maps strings to strings.

Dtypes handled (k3-model.md section 7): F32, BF16, F16 (any non-expert tensor may use
these; they are widened EXACTLY to float64), U8 (MXFP4 payloads), and F64 for
convenience. All multi-byte values are little-endian.
"""
import json
import os
import struct

import numpy as np

# dtype name -> (numpy storage dtype, bytes per element)
DTYPES = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # raw bits; see bf16_bits_to_f32
    "U8": (np.dtype("u1"), 1),
}


class SafetensorsError(ValueError):
    """A malformed or inconsistent safetensors file; the message names file and tensor."""


def bf16_bits_to_f32(bits):
    """BF16 is the upper half of an IEEE binary32: widening is a 16-bit shift (exact)."""
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x):
    """Round float32 values to BF16 (round to nearest, ties to even) and return the bits.

    Done with integer arithmetic so the result does not depend on numpy's version.
    Inputs must be finite (the generator never produces NaN/Inf).
    """
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return rounded.astype(np.uint16)


def widen(raw, dtype):
    """Widen a raw little-endian array of safetensors dtype `dtype` to float64, exactly.

    U8 is returned unchanged (uint8): it carries MXFP4 codes/exponents, not numbers.
    """
    if dtype == "BF16":
        return bf16_bits_to_f32(raw).astype(np.float64)
    if dtype in ("F32", "F16", "F64"):
        return raw.astype(np.float64)
    if dtype == "U8":
        return raw
    raise SafetensorsError("unsupported dtype %s" % dtype)


class SafetensorsFile:
    """One .safetensors file, memory-mapped. `raw(name)` gives the stored array."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise SafetensorsError("%s: shorter than the 8-byte header length" % path)
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100 * 1024 * 1024:
                raise SafetensorsError("%s: header length %d does not fit the file" % (path, n))
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SafetensorsError("%s: header is not JSON: %s" % (path, e))
        self.data_start = 8 + n
        self.metadata = header.pop("__metadata__", None)
        self.entries = {}
        data_len = size - self.data_start
        for name, e in header.items():
            dt = e.get("dtype")
            if dt not in DTYPES:
                raise SafetensorsError("%s: tensor %s has unsupported dtype %r" % (path, name, dt))
            shape = [int(s) for s in e["shape"]]
            b, end = (int(o) for o in e["data_offsets"])
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if end - b != count * DTYPES[dt][1] or b < 0 or end > data_len:
                raise SafetensorsError("%s: tensor %s: offsets [%d, %d) do not match shape %s %s "
                                       "in a data section of %d bytes" % (path, name, b, end, shape, dt, data_len))
            self.entries[name] = (dt, tuple(shape), b, end)

    def names(self):
        return list(self.entries)

    def info(self, name):
        """(dtype, shape) of a tensor."""
        dt, shape, _, _ = self.entries[name]
        return dt, shape

    def raw(self, name):
        """The tensor as stored (BF16 as uint16 bits, U8 as uint8), shaped; read with pread."""
        dt, shape, b, end = self.entries[name]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            buf = os.pread(fd, end - b, self.data_start + b)
        finally:
            os.close(fd)
        if len(buf) != end - b:
            raise SafetensorsError("%s: short read of tensor %s" % (self.path, name))
        return np.frombuffer(buf, dtype=DTYPES[dt][0]).reshape(shape)

    def get(self, name):
        """The tensor widened to float64 (U8 stays uint8)."""
        return widen(self.raw(name), self.entries[name][0])


def tensor_nbytes(dtype, shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n * DTYPES[dtype][1]


def build_header(specs, metadata=None, align=8):
    """Serialize the header for `specs` = [(name, dtype, shape), ...] in data order.

    Offsets follow the order of `specs` (order of data = order of writing). The JSON is
    padded with spaces so the data section starts at a multiple of `align` bytes
    (`align=1`: no padding). Returns the full prefix: 8-byte length + JSON.
    """
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape in specs:
        n = tensor_nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": [int(s) for s in shape], "data_offsets": [off, off + n]}
        off += n
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(js))) % align
    js += b" " * pad
    return struct.pack("<Q", len(js)) + js


def to_storage_bytes(arr, dtype):
    """Convert an array (float values, or uint8 codes for U8) to its stored bytes.

    Floats are rounded to the target dtype: F32/F16 by numpy's IEEE casts (correctly
    rounded), BF16 by f32_to_bf16_bits (float64 -> float32 -> bf16, nearest-even).
    """
    if dtype == "U8":
        a = np.asarray(arr)
        assert a.dtype == np.uint8, "U8 tensors must be given as uint8"
        return np.ascontiguousarray(a).tobytes()
    if dtype == "BF16":
        a = np.asarray(arr)
        if a.dtype == np.uint16:  # already bits
            return np.ascontiguousarray(a, dtype="<u2").tobytes()
        return f32_to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes()
    return np.ascontiguousarray(arr, dtype=DTYPES[dtype][0]).tobytes()


def write_file(path, tensors, metadata=None, align=8):
    """Write `tensors` = [(name, dtype, array), ...] to `path`, in that order."""
    specs = [(n, d, np.shape(a)) for n, d, a in tensors]
    with open(path, "wb") as f:
        f.write(build_header(specs, metadata, align))
        for (name, dtype, arr), (_, _, shape) in zip(tensors, specs):
            data = to_storage_bytes(arr, dtype)
            assert len(data) == tensor_nbytes(dtype, shape), name
            f.write(data)
