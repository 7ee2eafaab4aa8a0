"""Checksums in checkpoints, and damage told from divergence: a byte flipped inside any
array of a checkpoint (the replay's frames, a network) is refused by name, exit 2, and
never trained on; weights read from disk as NaN are damage of that file, not a run that
diverged; a checkpoint from before checksums still loads, said to be unverified."""

import json
import shutil
import struct
import zlib

import numpy as np
import pytest
import torch
from helpers import TINY_ARGS

from qzoo.cli.main import main
from qzoo.errors import UserError
from qzoo.run import checkpoint


def header_of(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), 8 + n


def flip(path, name, at=0):
    """Flips the bits of byte `at` of array `name` in the file."""
    header, start = header_of(path)
    begin, end = header[name]["data_offsets"]
    assert begin + at < end
    data = bytearray(path.read_bytes())
    data[start + begin + at] ^= 0xFF
    path.write_bytes(bytes(data))


def without_checksums(path):
    """The file as a qzoo from before checksums wrote it: no "crc32" in its metadata."""
    data = path.read_bytes()
    header, start = header_of(path)
    del header["__metadata__"]["crc32"]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[start:])


STATE = {
    "small": np.arange(10, dtype=np.float32),
    "tensor": torch.arange(6, dtype=torch.bfloat16),
    "big": np.arange(3 * 2**20, dtype=np.uint8).reshape(3, 2**20),  # memory-mapped on load
    "n": 5,
}


def test_each_arrays_checksum_is_the_crc32_of_its_bytes(tmp_path):
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, {**STATE, "strided": np.arange(12, dtype=np.int64)[::3]})
    crcs = json.loads(header_of(path)[0]["__metadata__"]["crc32"])
    by_hand = {
        "small": zlib.crc32(np.arange(10, dtype=np.float32).tobytes()),
        "tensor": zlib.crc32(torch.arange(6, dtype=torch.bfloat16).view(torch.uint8).numpy()),
        "big": zlib.crc32(STATE["big"].tobytes()),
        "strided": zlib.crc32(np.array([0, 3, 6, 9], np.int64).tobytes()),
    }
    assert crcs == {k: f"{v:08x}" for k, v in by_hand.items()}


@pytest.mark.parametrize("name", ["small", "tensor", "big"])
def test_a_flipped_byte_in_any_array_is_refused_naming_file_and_array(tmp_path, name):
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, STATE)
    flip(path, name, at=5)
    with pytest.raises(UserError) as e:
        checkpoint.load(path)
    message = str(e.value)
    assert message.startswith(f"checkpoint {path} is damaged: array {name!r} does not match")
    assert "\n" not in message and "trains on none of it" in message


def test_a_file_without_checksums_loads_unverified_and_says_so(tmp_path, capsys):
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, STATE)
    without_checksums(path)
    flip(path, "small")  # nothing can tell
    loaded = checkpoint.load(path)
    assert loaded["small"][0] != 0 and np.array_equal(loaded["big"], STATE["big"])
    err = capsys.readouterr().err
    assert err == (f"qzoo: note: checkpoint {path} has no checksums (written by an older "
                   "qzoo): its arrays are loaded unverified\n")  # fmt: skip


@pytest.mark.parametrize("crc32", ['{"small":"00000000"}', "[]", '{"small":"x","tensor":1}'])
def test_a_forged_checksum_list_is_refused(tmp_path, crc32):
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, {"small": STATE["small"], "tensor": STATE["tensor"]})
    data = path.read_bytes()
    header, start = header_of(path)
    header["__metadata__"]["crc32"] = crc32
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[start:])
    with pytest.raises(UserError, match="is corrupt or not a qzoo checkpoint .bad checksum list"):
        checkpoint.load(path)


# ---- a run folder's checkpoint ------------------------------------------------------


def train(run_dir, iterations, *extra):
    args = list(TINY_ARGS)
    args[args.index("--iterations") + 1] = str(iterations)
    return main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir), *args, *extra])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "run"
    assert train(folder, 1) == 0
    return folder


@pytest.fixture
def run_dir(base, tmp_path):
    return shutil.copytree(base, tmp_path / "run")


def resume(run_dir):
    return train(run_dir, 2, "--accept-changes", "iterations")


def one_error(err):
    lines = [line for line in err.splitlines() if line.startswith("qzoo: error:")]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def largest(path, prefix):
    header, _ = header_of(path)
    names = [n for n in header if n.startswith(prefix)]
    return max(names, key=lambda n: np.diff(header[n]["data_offsets"])[0])


@pytest.mark.parametrize("prefix", ["trainer/replay", "trainer/learner/online"])
def test_a_resume_from_a_flipped_checkpoint_stops_before_training(run_dir, prefix, capsys):
    path = run_dir / "checkpoints" / "latest.safetensors"
    name = largest(path, prefix)
    flip(path, name, at=3)
    before = path.read_bytes(), (run_dir / "results.csv").read_bytes()
    capsys.readouterr()
    assert resume(run_dir) == 2
    line = one_error(capsys.readouterr().err)
    assert f"checkpoint {path} is damaged: array {name!r} does not match its checksum" in line
    assert "iteration=2" not in capsys.readouterr().out
    assert (path.read_bytes(), (run_dir / "results.csv").read_bytes()) == before


def test_nan_weights_read_from_disk_are_damage_not_divergence(run_dir, capsys):
    path = run_dir / "checkpoints" / "latest.safetensors"
    state = checkpoint.load(path)
    weight = next(iter(state["trainer"]["learner"]["online"]))
    state["trainer"]["learner"]["online"][weight][0].fill_(float("nan"))
    checkpoint.save(path, state)  # its checksums agree: only the values tell
    capsys.readouterr()
    assert resume(run_dir) == 2  # not Diverged's 3
    line = one_error(capsys.readouterr().err)
    where = f"trainer/learner/online/{weight}"
    assert f"checkpoint {path} is damaged: array {where!r} holds " in line
    assert "learning-rate" not in line and "last good" not in line and "diverge" in line


def test_a_run_checkpoint_without_checksums_resumes_unverified(run_dir, capsys):
    path = run_dir / "checkpoints" / "latest.safetensors"
    without_checksums(path)
    capsys.readouterr()
    assert resume(run_dir) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {path} has no checksums" in err and "unverified" in err
    assert "crc32" in header_of(path)[0]["__metadata__"]  # its next save has them


def test_a_tool_refuses_a_damaged_network_snapshot(run_dir):
    from qzoo.tools.runs import load_run

    path = run_dir / "checkpoints" / "networks" / "iteration-0.safetensors"
    weights = checkpoint.load(path)
    name = next(iter(weights))
    weights[name].view(-1)[1] = float("inf")
    checkpoint.save(path, weights)
    with pytest.raises(UserError) as e:
        load_run(str(run_dir), 0)
    assert str(e.value) == (f"{path} is damaged: array {name!r} holds 1 NaN or infinite "
                            "values, which training never saves")  # fmt: skip
    weights[name].view(-1)[1] = 0.5
    checkpoint.save(path, weights)
    flip(path, name, at=4)
    with pytest.raises(UserError) as e:
        load_run(str(run_dir), 0)
    message = str(e.value)
    assert message.startswith(f"checkpoint {path} is damaged: array {name!r} does not match")
    assert message.endswith("; choose another --checkpoint, or latest")
    assert load_run(str(run_dir), 1).iteration == 1  # another one still loads
