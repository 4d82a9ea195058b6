"""_npy.py — .npy files without NumPy (format 1.0, 2.0 and 3.0; the
little-endian types kernbench writes: <f2, <f4, <f8, <i4).

With NumPy installed, kernbench.Result.tensors gives numpy arrays (numpy.load);
without, it gives Tensor objects from this reader. A malformed file raises
ValueError naming the file and what is wrong.
"""
import ast
import struct

_TYPES = {"<f2": ("e", 2), "<f4": ("f", 4), "<f8": ("d", 8), "<i4": ("i", 4)}


class Tensor:
    """An .npy array read without NumPy: `dtype` ("<f4", ...), `shape` (a
    tuple) and `values`, the elements in C order as a flat list of floats
    or ints. `tolist()` nests them by the shape, as numpy's would."""

    def __init__(self, dtype, shape, values):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.values = values

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def tolist(self):
        def nest(vals, shape):
            if len(shape) <= 1:
                return list(vals)
            step = len(vals) // shape[0] if shape[0] else 0
            return [nest(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
        return nest(self.values, self.shape) if self.shape else self.values[0]

    def __repr__(self):
        return "Tensor(dtype=%r, shape=%r)" % (self.dtype, self.shape)


def read(path):
    """The Tensor in `path`."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError("%s: not an .npy file (no magic)" % path)
    major = data[6]
    if major == 1:
        hlen, start = struct.unpack("<H", data[8:10])[0], 10
    elif major in (2, 3):
        hlen, start = struct.unpack("<I", data[8:12])[0], 12
    else:
        raise ValueError("%s: .npy format %d is not known" % (path, major))
    try:
        header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
        dtype, order, shape = header["descr"], header["fortran_order"], header["shape"]
    except (ValueError, SyntaxError, KeyError, TypeError) as e:
        raise ValueError("%s: bad .npy header (%s)" % (path, e))
    if dtype not in _TYPES or order:
        raise ValueError("%s: dtype %r%s is not one kernbench writes" %
                         (path, dtype, " in Fortran order" if order else ""))
    code, size = _TYPES[dtype]
    count = 1
    for d in shape:
        count *= d
    body = data[start + hlen:]
    if len(body) < count * size:
        raise ValueError("%s: %d bytes of data, the shape needs %d" % (path, len(body), count * size))
    return Tensor(dtype, shape, list(struct.unpack("<%d%s" % (count, code), body[:count * size])))
