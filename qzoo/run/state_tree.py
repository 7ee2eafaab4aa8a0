"""A checkpoint's state tree as JSON plus named arrays, and back.

A state is a nested tree of dicts, lists and tuples whose leaves are numpy arrays,
torch tensors, numpy scalars, int, float, str, bool or None. `encode` turns it into a
JSON-able tree with a placeholder per array (naming it, and whether it was a numpy array
or a torch tensor) and the list of those arrays; `decode` is its inverse. Tags
({"$": ...}) keep what JSON cannot: tuples, dicts with non-string keys (torch optimizers
key their state by int), NaN and infinities, numpy scalars. The file around it, its
header, checksums and atomic writing, is run/checkpoint.py's."""

import math

import numpy as np
import torch

# safetensors dtype name -> (numpy dtype or None, torch dtype). Only these are written,
# and a header naming any other is refused.
DTYPES = {
    "BOOL": (np.bool_, torch.bool),
    "U8": (np.uint8, torch.uint8),
    "I8": (np.int8, torch.int8),
    "I16": (np.int16, torch.int16),
    "U16": (np.uint16, torch.uint16),
    "I32": (np.int32, torch.int32),
    "U32": (np.uint32, torch.uint32),
    "I64": (np.int64, torch.int64),
    "U64": (np.uint64, torch.uint64),
    "F16": (np.float16, torch.float16),
    "BF16": (None, torch.bfloat16),
    "F32": (np.float32, torch.float32),
    "F64": (np.float64, torch.float64),
}
BY_NUMPY = {np.dtype(n): name for name, (n, _) in DTYPES.items() if n is not None}
BY_TORCH = {t: name for name, (_, t) in DTYPES.items()}
ITEMSIZE = {name: torch.empty((), dtype=t).element_size() for name, (_, t) in DTYPES.items()}


def encode(state):
    """(the JSON-able tree of `state`, [(name, array or tensor, dtype name), ...]): each
    array is left in the tree as a placeholder named by its path (unique: a clash gets
    primes appended). TypeError for a leaf of another type or dtype."""
    arrays = []
    return _encoded(state, "", arrays, set()), arrays


def _encoded(value, path, arrays, names):
    """The JSON form of `value`; arrays are appended to `arrays` and left as placeholders
    named by their path in the tree (unique: a clash gets primes appended)."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        kind = "torch" if isinstance(value, torch.Tensor) else "numpy"
        dtype = (BY_TORCH if kind == "torch" else BY_NUMPY).get(value.dtype)
        if dtype is None:
            raise TypeError(f"checkpoint: {path or 'root'} has unsupported dtype {value.dtype}")
        name = path or "root"
        while name in names or name == "__metadata__":
            name += "'"
        names.add(name)
        arrays.append((name, value, dtype))
        return {"$": "array", "name": name, "kind": kind}
    if isinstance(value, np.generic):  # numpy scalars keep their dtype
        if value.dtype not in BY_NUMPY:
            raise TypeError(f"checkpoint: {path} has unsupported dtype {value.dtype}")
        return {"$": "scalar", "dtype": str(value.dtype), "value": _plain(value.item())}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
    if isinstance(value, dict):
        items = [
            (k, _encoded(v, f"{path}/{k}".lstrip("/"), arrays, names)) for k, v in value.items()
        ]
        if all(isinstance(k, str) for k in value) and "$" not in value:
            return dict(items)
        return {"$": "dict", "items": [[_plain(k), v] for k, v in items]}
    if isinstance(value, (list, tuple)):
        items = [_encoded(v, f"{path}/{i}".lstrip("/"), arrays, names) for i, v in enumerate(value)]
        return items if isinstance(value, list) else {"$": "tuple", "items": items}
    raise TypeError(f"checkpoint: cannot store {type(value).__name__} at {path or 'root'}")


def _plain(value):
    """Dict keys and scalar values: the tree's plain types, never arrays."""
    arrays = []
    encoded = _encoded(value, "key", arrays, set())
    if arrays:
        raise TypeError("checkpoint: arrays cannot be dict keys")
    return encoded


def decode(node, read):
    """Inverse of `encode`; `read(name, kind)` returns the array behind a placeholder."""
    if isinstance(node, list):
        return [decode(v, read) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get("$")
    if tag is None:
        return {k: decode(v, read) for k, v in node.items()}
    if tag == "array":
        return read(node["name"], node["kind"])
    if tag == "scalar":
        dtype = np.dtype(node["dtype"])  # a name from the file: only the table's dtypes
        if dtype not in BY_NUMPY:
            raise ValueError(f"scalar of dtype {dtype}")
        return dtype.type(decode(node["value"], read))
    if tag == "float":
        if node["value"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"bad float {node['value']!r}")
        return float(node["value"])
    if tag == "tuple":
        return tuple(decode(v, read) for v in node["items"])
    if tag == "dict":
        keys = [decode(k, read) for k, _ in node["items"]]
        if any(isinstance(k, (list, dict, np.ndarray, torch.Tensor)) for k in keys):
            raise TypeError("unhashable dict key")
        return {k: decode(v, read) for k, (_, v) in zip(keys, node["items"])}
    raise ValueError(f"unknown tag {tag!r}")
