"""checkpoint.save / load: every leaf type round-trips, the file is real safetensors,
nothing in a file can run code, and anything malformed is refused by name."""

import json
import math
import os
import pickle
import struct
import tracemalloc

import numpy as np
import pytest
import torch

from qzoo.errors import UserError
from qzoo.run import checkpoint

NUMPY_DTYPES = ("bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64",
                "uint64", "float16", "float32", "float64")  # fmt: skip
TORCH_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
                torch.float32, torch.float64)  # fmt: skip


def every_leaf():
    """A tree with every kind of leaf and node a Trainer's state uses, or may use."""
    generator = np.random.default_rng(7)
    generator.random(3)
    big = np.arange(3 * 2**20, dtype=np.uint8).reshape(3, 2**20)  # memory-mapped on load
    return {
        "numpy": {dt: np.arange(6).astype(dt).reshape(2, 3) for dt in NUMPY_DTYPES},
        "torch": {str(dt): torch.arange(6).to(dt).reshape(3, 2) for dt in TORCH_DTYPES},
        "zero_d": (np.array(2.5, np.float32), torch.tensor(3.0)),
        "empty": [np.zeros((0, 84, 84), np.uint8), torch.zeros(0)],
        "strided": np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
        "requires_grad": torch.ones(2, requires_grad=True),
        "big": big,
        "random_state": np.random.RandomState(3).get_state(),  # a tuple holding an array
        "generator": generator.bit_generator.state,  # dicts with 128-bit Python ints
        "torch_generator": torch.Generator().manual_seed(5).get_state(),  # uint8 tensor
        "optimizer": {  # int keys, tuples
            "state": {0: {"step": torch.tensor(4.0)}, 1: {}},
            "param_groups": [{"betas": (0.9, 0.999), "params": [0, 1], "foreach": None}],
        },
        "floats": [0.1, -0.0, 1e308, math.nan, math.inf, -math.inf],
        "plain": [0, -(2**70), True, False, None, "x", "", "ünïcode"],
        "scalars": (
            np.float32(1.25),
            np.float64(math.nan),
            np.int64(-3),
            np.uint8(7),
            np.bool_(True),
            np.float16(0.5),
        ),
        "odd keys": {"$": 1, "a/b": 2, 3.5: "float key", None: "none key", (1, "a"): "tuple"},
        "rows": [{"iteration": 0, "train_loss": math.nan}],
    }


def assert_same(a, b, where="root"):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)), where
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.detach(), b), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, (float, np.floating)) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b and repr(a) == repr(b), where


def test_every_leaf_type_round_trips(tmp_path):
    state = every_leaf()
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, state)
    loaded = checkpoint.load(path)
    assert_same(state, loaded)
    assert isinstance(loaded["big"], np.memmap)  # not read into memory
    loaded["big"][0, 0] = 99  # copy-on-write: writable, the file unchanged
    assert checkpoint.load(path)["big"][0, 0] == 0
    np.random.RandomState().set_state(loaded["random_state"])
    np.random.default_rng().bit_generator.state = loaded["generator"]
    torch.Generator().set_state(loaded["torch_generator"])
    assert os.listdir(tmp_path) == ["latest.safetensors"]  # no temporary file left


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_tensor_is_saved_chunk_by_chunk_and_loads_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 1024)
    tensor = torch.randn(1000, device="cuda")
    checkpoint.save(tmp_path / "c.safetensors", {"t": tensor})
    assert torch.equal(checkpoint.load(tmp_path / "c.safetensors")["t"], tensor.cpu())


def test_unsupported_leaf_is_a_type_error_and_leaves_nothing(tmp_path):
    with pytest.raises(TypeError, match="object at x"):
        checkpoint.save(tmp_path / "c.safetensors", {"x": object()})
    with pytest.raises(TypeError, match="complex"):
        checkpoint.save(tmp_path / "c.safetensors", {"x": np.zeros(2, np.complex64)})
    assert os.listdir(tmp_path) == []


def test_the_real_safetensors_library_reads_it(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    state = {"agent": {"w": torch.randn(4, 3), "b": torch.zeros(4, dtype=torch.bfloat16)},
             "replay": {"frames": np.arange(2 * 84 * 84, dtype=np.uint8).reshape(2, 84, 84),
                        "rewards": np.array([1.0, -1.0], np.float32), "cursor": 2}}  # fmt: skip
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, state)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        assert torch.equal(f.get_tensor("agent/w"), state["agent"]["w"])
        assert torch.equal(f.get_tensor("agent/b"), state["agent"]["b"])
    assert meta["format"] == "qzoo" and meta["format_version"] == str(checkpoint.FORMAT_VERSION)
    assert json.loads(meta["tree"])["replay"]["cursor"] == 2
    del state["agent"]["b"]  # numpy has no bfloat16
    checkpoint.save(path, state)
    arrays = load_file(str(path))
    assert np.array_equal(arrays["replay/frames"], state["replay"]["frames"])
    assert np.array_equal(arrays["replay/rewards"], state["replay"]["rewards"])


def test_save_and_load_do_not_copy_large_arrays(tmp_path):
    frames = np.ones((64, 2**20), np.uint8)  # 64 MiB, a small replay
    path = tmp_path / "latest.safetensors"
    tracemalloc.start()
    try:
        checkpoint.save(path, {"frames": frames, "n": 1})
        _, save_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        loaded = checkpoint.load(path)
        _, load_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert save_peak < 2 * checkpoint.CHUNK_BYTES and load_peak < 2**20
    assert np.array_equal(loaded["frames"], frames)


class CreatesAFile:
    """A pickle payload: unpickling it opens (creates) the file at `path`."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
@pytest.mark.parametrize("name", ["latest.pt", "latest.safetensors"])
def test_planted_pickle_is_refused_and_never_runs(tmp_path, writer, name):
    marker = tmp_path / "pwned"
    path = tmp_path / name
    with open(path, "wb") as f:
        if writer == "pickle":
            pickle.dump({"trainer": CreatesAFile(marker)}, f, protocol=4)
        else:
            torch.save({"trainer": CreatesAFile(marker)}, f)
    # The payload is live: unpickling it would create the file.
    if writer == "pickle":
        pickle.loads(path.read_bytes())
        assert marker.exists()
        marker.unlink()
    with pytest.raises(UserError, match="pickle file") as e:
        checkpoint.load(path)
    assert "can run code" in str(e.value) and str(path) in str(e.value)
    assert not marker.exists()


def good_file(tmp_path):
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, {"w": np.arange(10, dtype=np.float32), "t": torch.ones(3), "n": 5})
    return path, path.read_bytes()


def header_of(data):
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def with_header(header, body):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def edit_header(edit):
    def apply(data):
        header, body = header_of(data)
        edit(header)
        return with_header(header, body)

    return apply


def set_entry(name, key, value):
    return edit_header(lambda h: h[name].__setitem__(key, value))


def set_meta(key, value):
    return edit_header(lambda h: h["__metadata__"].__setitem__(key, value))


def retag(header):
    tree = json.loads(header["__metadata__"]["tree"])
    tree["w"]["$"] = "pickle"
    header["__metadata__"]["tree"] = json.dumps(tree)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: b"", "0 bytes, shorter than a header"),
        (lambda d: d[:5], "shorter than a header"),
        (lambda d: d[:20], "does not fit a file"),
        (lambda d: d[:-1], "but its header describes"),
        (lambda d: d + b"\0", "but its header describes"),
        (lambda d: struct.pack("<Q", 2**62) + d[8:], "header length"),
        (lambda d: d[:8] + b"#" + d[9:], "header is not JSON"),
        (lambda d: d[:8] + d[8:40].replace(b'"', b"'") + d[40:], "header is not JSON"),
        (set_entry("w", "dtype", "F8_E4M3"), "bad header entry for 'w'"),
        (set_entry("w", "dtype", "O"), "bad header entry for 'w'"),
        (set_entry("w", "shape", [11]), "bad header entry for 'w'"),
        (set_entry("w", "shape", [-10]), "bad header entry for 'w'"),
        (set_entry("w", "data_offsets", [4, 44]), "not contiguous"),
        (set_entry("w", "extra", 1), "bad header entry for 'w'"),
        (set_meta("format", "other"), "no qzoo metadata"),
        (edit_header(lambda h: h.pop("__metadata__")), "no qzoo metadata"),
        (set_meta("tree", "{"), "bad tree"),
        (set_meta("tree", '{"w": {"$": "array", "name": "nope", "kind": "numpy"}}'), "bad tree"),
        (set_meta("tree", '{"n": 5}'), "arrays outside the tree"),
        (edit_header(retag), "unknown tag 'pickle'"),
        (set_meta("tree", "[" * 100_000 + "]" * 100_000), "bad tree: RecursionError"),
    ],
)
def test_damaged_or_forged_file_is_refused_by_name(tmp_path, damage, message):
    path, data = good_file(tmp_path)
    path.write_bytes(damage(data))
    with pytest.raises(UserError, match="is corrupt or not a qzoo checkpoint") as e:
        checkpoint.load(path)
    assert message in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_other_format_version_is_refused(tmp_path):
    path, data = good_file(tmp_path)
    path.write_bytes(set_meta("format_version", "99")(data))
    with pytest.raises(UserError, match="has qzoo format version '99'; this qzoo reads version 1"):
        checkpoint.load(path)


def test_safetensors_file_of_another_program_is_refused(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "latest.safetensors"
    save_file({"weight": np.ones(3, np.float32)}, str(path))
    with pytest.raises(UserError, match="no qzoo metadata"):
        checkpoint.load(path)


def test_failed_save_keeps_the_previous_file(tmp_path, monkeypatch):
    path, data = good_file(tmp_path)

    def full(fd, chunk):
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save(path, {"w": np.zeros(100)})
    assert path.read_bytes() == data and os.listdir(tmp_path) == ["latest.safetensors"]
