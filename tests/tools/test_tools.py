"""The toolbox on tiny run folders made here: eval, play, record, profile, and their
one-line refusals of bad input."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers import REPO, TINY_ARGS, replacing, small_disk

from qzoo.cli.main import main

TINY = TINY_ARGS


def train(run_dir, agent="dqn", env="CartPole-v1", extra=()):
    assert main(["train", agent, "--env", env, "--run-dir", str(run_dir), *TINY, *extra]) == 0
    return run_dir


@pytest.fixture(scope="module")
def cartpole(tiny_run):
    return tiny_run


@pytest.fixture(scope="module")
def pong(tmp_path_factory):
    """A tiny Atari run: two iterations of 400 frames of the Nature CNN."""
    run_dir = tmp_path_factory.mktemp("runs") / "pong"
    args = ["train", "dqn", "--env", "pong", "--run-dir", str(run_dir), "--iterations", "1",
            "--train-frames", "400", "--eval-frames", "200", "--replay-capacity", "1000",
            "--min-replay-capacity-fraction", "0.05", "--no-tensorboard", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    return run_dir


def eval_json(capsys, *argv):
    capsys.readouterr()
    assert main(["eval", *map(str, argv), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


# ---- eval --------------------------------------------------------------------------


def test_every_iteration_keeps_its_network(cartpole):
    names = sorted(os.listdir(cartpole / "checkpoints" / "networks"))
    assert names == [f"iteration-{k}.safetensors" for k in range(3)]


def test_snapshot_interval_keeps_every_kth(tmp_path):
    run_dir = train(tmp_path / "run", extra=["--snapshot-interval", "2"])
    assert sorted(os.listdir(run_dir / "checkpoints" / "networks")) == [
        "iteration-0.safetensors", "iteration-2.safetensors"
    ]  # fmt: skip
    # A kill between the checkpoint and its network: the next start writes the network.
    lost = run_dir / "checkpoints" / "networks" / "iteration-2.safetensors"
    saved = lost.read_bytes()
    lost.unlink()
    # The interval changes no result, so a resume may change it.
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir),
                 *replacing(TINY, ["--iterations", "3", "--accept-changes", "iterations",
                                   "--snapshot-interval", "1"])]) == 0  # fmt: skip
    assert "iteration-3.safetensors" in os.listdir(run_dir / "checkpoints" / "networks")
    assert lost.read_bytes() == saved


def test_eval_is_reproducible_with_a_seed(cartpole, capsys):
    first = eval_json(capsys, cartpole, "--episodes", 4, "--epsilon", 0.5, "--seed", 3)
    again = eval_json(capsys, cartpole, "--episodes", 4, "--epsilon", 0.5, "--seed", 3)
    other = eval_json(capsys, cartpole, "--episodes", 4, "--epsilon", 0.5, "--seed", 4)
    assert first == again and first["returns"] != other["returns"]
    assert first["episodes"] == 4 and len(first["returns"]) == 4
    assert first["checkpoint"] == 2 and first["latest"] and first["seed"] == 3
    assert first["protocol"] is None and first["normalized_return"] is None
    stats = first["return"]
    assert stats["min"] <= stats["median"] <= stats["max"]
    assert stats["mean"] == pytest.approx(sum(first["returns"]) / 4)


def qzoo_process(*argv):
    """`qzoo ARGV` in a fresh process (this checkout's qzoo), stdout piped."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "qzoo", *map(str, argv)], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_eval_numbers_do_not_depend_on_the_process(cartpole, capsys):
    here = eval_json(capsys, cartpole, "--episodes", 3, "--epsilon", 0.3, "--seed", 5)
    there = qzoo_process("eval", cartpole, "--episodes", 3, "--epsilon", 0.3, "--seed", 5,
                         "--json")  # fmt: skip
    assert there.returncode == 0 and json.loads(there.stdout) == here


def test_eval_of_a_kept_iteration_and_the_table(cartpole, capsys):
    result = eval_json(capsys, cartpole, "--checkpoint", 0, "--frames", 60, "--num-envs", 2)
    assert result["checkpoint"] == 0 and not result["latest"] and result["frames"] >= 60
    assert main(["eval", str(cartpole), "--episodes", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "iteration 2 (latest)" in out[0] and out[1].startswith("2 episodes")
    assert out[2].split() == ["mean", "median", "min", "max", "std"]
    assert out[3].startswith("return") and out[4].split()[1:] == ["n/a"] * 5


@pytest.mark.slow
def test_eval_on_atari_under_each_protocol(pong, capsys):
    results = {
        protocol: eval_json(capsys, pong, "--protocol", protocol, "--frames", 400)
        for protocol in ("dqn_zoo", "machado", "noop30")
    }
    assert results["noop30"]["epsilon"] == 0.05  # Mnih et al. 2015's evaluation epsilon
    assert results["machado"]["epsilon"] == results["dqn_zoo"]["epsilon"] == 0.05
    for result in results.values():
        assert result["frames"] >= 400 and result["normalized_return"] is not None


@pytest.fixture(scope="module")
def minatar(tmp_path_factory):
    # IQN (taus when acting), few and small updates: a test of the tools, not of learning.
    extra = ["--learn-period", "30", "--tau-samples-s-tm1", "8", "--tau-samples-s-t", "8"]
    return train(tmp_path_factory.mktemp("runs") / "minatar", "iqn", "minatar/breakout", extra)


@pytest.fixture(scope="module")
def rainbow(tmp_path_factory):
    return train(tmp_path_factory.mktemp("runs") / "rainbow", "rainbow")


def test_eval_of_other_agents_and_domains(minatar, rainbow, capsys):
    for run_dir in (minatar, rainbow):
        result = eval_json(capsys, run_dir, "--episodes", 2)
        assert result["episodes"] == 2 and result == eval_json(capsys, run_dir, "--episodes", 2)


# ---- play --------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["cartpole", "minatar", "pong"])
def test_play_without_a_terminal_draws_frames_and_exits(which, request, capsys):
    run_dir = request.getfixturevalue(which)
    assert main(["play", str(run_dir), "--frames", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("frame ") == 3 and "frame 3\n" in out
    assert "\x1b[38;2;" in out and "\u2580" in out  # 24-bit colour half blocks
    iteration = 1 if which == "pong" else 2
    assert "score " in out and "Q-values" in out and f"iteration {iteration}" in out
    # One Q-value per action, the chosen one marked.
    assert out.count("\x1b[1;32m>") == 3
    if which == "cartpole":  # a real process with its stdout piped: no terminal
        result = qzoo_process("play", run_dir, "--frames", "2")
        assert result.returncode == 0 and result.stdout.count("\x1b[1;32m>") == 2


@pytest.mark.parametrize("game", ["pong", "space_invaders", "ms_pacman"])
def test_atari_screen_sees_what_the_vector_env_gives_the_agent(game):
    """screen.py's own Atari preprocessing equals ale-py's vector environment's, pixel
    for pixel, so that play and record show the agent what it was trained on."""
    import numpy as np
    from ale_py.vector_env import AtariVectorEnv

    from qzoo.configuration import build_config
    from qzoo.tools.screen import AtariGame

    config = build_config("dqn", {"env": game})
    atari = AtariGame(config, game, seed=3)
    atari.noop_min = atari.noop_max = 0  # the vector env draws its own: compare without
    vector = AtariVectorEnv(game, 1, num_threads=1, repeat_action_probability=0.0,
                            autoreset_mode="NextStep", stack_num=1, noop_max=0,
                            reward_clipping=False, use_fire_reset=False)  # fmt: skip
    obs, _ = vector.reset(seed=3)
    frame, _ = atari.reset()
    assert (frame == obs[0, -1]).all()
    rng = np.random.default_rng(0)
    for _ in range(120):
        action = int(rng.integers(len(atari.actions)))
        obs, reward, *_ = vector.step(np.array([action]))
        frame, atari_reward, _, pictures = atari.step(action)
        assert (frame == obs[0, -1]).all() and atari_reward == reward[0]
        assert len(pictures) == 4 and pictures[0].shape == (210, 160, 3)
    vector.close()


# ---- record ------------------------------------------------------------------------


def decode(path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    reader = imageio.get_reader(str(path))
    frames = [frame for frame in reader]
    return reader.get_meta_data(), frames


def test_record_writes_a_decodable_mp4(minatar, tmp_path, capsys):
    pytest.importorskip("imageio")
    out = tmp_path / "clip.mp4"
    assert main(["record", str(minatar), "--out", str(out), "--episodes", "2"]) == 0
    line = capsys.readouterr().out
    meta, frames = decode(out)
    assert line.startswith(f"{out}: {len(frames)} frames at 10 fps; episode returns ")
    assert meta["fps"] == 10 and len(line.split("returns ")[1].split(",")) == 2
    # MinAtar's 10x10 at 24 pixels a cell, beside a 200-pixel panel.
    assert frames[0].shape == (240, 440, 3) and frames[0].std() > 0
    assert [n for n in os.listdir(tmp_path)] == ["clip.mp4"]  # no temporary file left


@pytest.mark.slow
def test_record_atari_in_colour_at_60_fps(pong, tmp_path, capsys):
    pytest.importorskip("imageio")
    out = tmp_path / "pong.mp4"
    assert main(["record", str(pong), "--out", str(out), "--frames", "90", "--no-panel",
                 "--scale", "1"]) == 0  # fmt: skip
    meta, frames = decode(out)
    assert meta["fps"] == 60 and len(frames) == 90 and frames[0].shape == (210, 160, 3)
    colour = frames[-1].astype(int)
    assert (abs(colour[..., 0] - colour[..., 1]) > 30).any()  # not grayscale
    default = pong / "videos" / "iteration-1.mp4"
    assert main(["record", str(pong), "--frames", "8"]) == 0 and default.exists()
    shutil.rmtree(pong / "videos")


def test_record_removes_what_a_killed_recording_left_and_nothing_being_written(minatar,
                                                                             tmp_path):  # fmt: skip
    """Issue 34 #11: a recording killed by SIGKILL left its .tmp-*-NAME.mp4, which no
    later one removed. A kill leaves it unlocked (the kernel drops a dead process's
    flock); one being written is locked by its writer and stays."""
    pytest.importorskip("imageio")
    from qzoo.files import held_temporary

    (tmp_path / ".tmp-k1ll3d-clip.mp4").write_bytes(b"\0" * 1000)  # as SIGKILL leaves it
    live, held = held_temporary(str(tmp_path), ".tmp-", "-clip.mp4")  # another recording's
    try:
        assert main(["record", str(minatar), "--out", str(tmp_path / "clip.mp4"),
                     "--frames", "5"]) == 0  # fmt: skip
        assert sorted(os.listdir(tmp_path)) == sorted(["clip.mp4", os.path.basename(live)])
    finally:
        os.close(held)


def test_sigterm_during_record_is_one_line_and_leaves_no_file(minatar, tmp_path):
    """Issue 34 #11: SIGTERM in the middle of a frame sent to ffmpeg made it print
    "corrupt input packet" lines, and qzoo printed none of its own. A frame is now sent
    whole (the signal waits for it), ffmpeg ends cleanly, and the line says what
    happened."""
    pytest.importorskip("imageio")
    out = tmp_path / "clip.mp4"
    # Minutes of big frames: still recording when the signal comes, however loaded.
    command = [sys.executable, "-m", "qzoo", "record", str(minatar), "--out", str(out),
               "--episodes", "1000", "--scale", "64"]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                            env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # only a bound on a broken test: never reached
        while not [n for n in os.listdir(tmp_path) if os.path.getsize(tmp_path / n) > 0]:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # ffmpeg has written frames: mid-recording
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err.splitlines() == [f"qzoo: interrupted; {out} was not written"], err
    assert os.listdir(tmp_path) == []


def test_a_video_ffmpeg_could_not_complete_is_refused_not_renamed_into_place(minatar, tmp_path,
                                                                            monkeypatch, capsys):  # fmt: skip
    """A full disk when ffmpeg writes the MP4's index (last) left a file no player opens,
    and `qzoo record` said it was written, exit 0: imageio-ffmpeg does not look at
    ffmpeg's exit status (found by issue 34's fault pass). The file is checked now."""
    pytest.importorskip("imageio")
    from qzoo.tools import record

    check = record.check_mp4

    def cut_short(path, out):  # as a full disk leaves it: the index missing
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        check(path, out)

    monkeypatch.setattr(record, "check_mp4", cut_short)
    out = tmp_path / "clip.mp4"
    assert main(["record", str(minatar), "--out", str(out), "--frames", "20"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qzoo: error: cannot write {out}: ffmpeg did not complete it (a full "
                          "disk? ") and err.count("\n") == 1, err  # fmt: skip
    assert os.listdir(tmp_path) == []


def test_record_on_a_full_disk_is_one_line_and_leaves_no_file(minatar, tmp_path, capsys):
    pytest.importorskip("imageio")
    with small_disk(tmp_path / "disk") as disk:  # a few kB left: not a video's index
        out = disk / "clip.mp4"
        assert main(["record", str(minatar), "--out", str(out), "--frames", "50"]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith(f"qzoo: error: cannot write {out}: ")
        assert captured.err.count("\n") == 1, captured.err  # no ffmpeg lines either
        assert os.listdir(disk) == ["filler"]


def test_record_without_imageio_names_the_extra(cartpole, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "imageio", None)  # `import imageio` fails
    monkeypatch.setitem(sys.modules, "imageio.v2", None)
    assert main(["record", str(cartpole), "--out", "x.mp4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'qzoo[video]'" in err


# ---- profile -----------------------------------------------------------------------


@pytest.mark.parametrize("kind, game", [("env", "pong"), ("act", "minatar/breakout"),
                                        ("train", "CartPole-v1")])  # fmt: skip
def test_profile_shows_where_the_time_goes(kind, game, capsys):
    assert main(["profile", kind, "--env", game, "--steps", "100", "--json", "--top", "5"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kind"] == kind and result["steps"] == 100 and result["steps_per_second"] > 0
    assert 0 < len(result["top"]) <= 5 and set(result["shares"]) == {
        "env", "act", "replay", "learn", "other"
    }  # fmt: skip
    busiest = {"env": "env", "act": "act", "train": "learn"}[kind]
    assert result["shares"][busiest] > 0.2
    assert main(["profile", kind, "--env", game, "--steps", "20", "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"profile {kind}: dqn on {game}") and "steps/s" in out[1]
    assert out[2].startswith("time by part") and len(out) == 7


def test_profile_with_the_torch_profiler(capsys):
    # --game, profile's old name for --env, still works.
    argv = ["profile", "act", "--game", "CartPole-v1", "--steps", "20", "--profiler", "torch"]
    assert main(argv + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["shares"] is None and any("aten::" in r["function"] for r in result["top"])
    assert result["env"] == "CartPole-v1"


# ---- bad input ---------------------------------------------------------------------

# (argv after `qzoo`, with {run} a good run, {missing} / {empty} / {foreign} / {bad_net}
# / {odd_net} folders that are not one; a fragment of the one error line)
BAD = [
    (["eval"], "qzoo eval needs a run folder"),
    (["eval", "{missing}"], "does not exist; expected a folder `qzoo train` wrote"),
    (["eval", "{empty}"], "holds no checkpoint (checkpoints/latest.safetensors)"),
    (["eval", "{foreign}"], "is corrupt or not a qzoo checkpoint"),
    (["eval", "{run}", "--checkpoint", "9"], "--checkpoint: bad value 9; "),
    (["eval", "{run}", "--checkpoint", "9"], "keeps the networks of iterations 0-2, and latest"),
    (["eval", "{run}", "--checkpoint", "first"], "--checkpoint: bad value first; expected latest"),
    (["eval", "{run}", "--checkpoint", "-1"], "--checkpoint: bad value -1"),
    (["eval", "{bad_net}", "--checkpoint", "1"], "iteration-1.safetensors' is corrupt"),
    (["eval", "{odd_net}", "--checkpoint", "1"], "iteration-1.safetensors is not a qzoo network"),
    (["eval", "{odd_net}", "--checkpoint", "0"], "its network does not match the run's config"),
    # Issue 34 #18: the latest iteration's kept network, named, was never read (the
    # checkpoint's copy was), and its damage went unsaid.
    (["eval", "{bad_latest}", "--checkpoint", "2"], "networks/iteration-2.safetensors"),
    (["export", "{bad_latest}", "{bad_latest}-model", "--checkpoint", "2"],
     "; choose another --checkpoint, or latest"),
    (["eval", "{run}", "--episodes", "0"], "--episodes: bad value 0; expected an integer"),
    (["eval", "{run}", "--episodes", "many"], "--episodes: bad value many"),
    (["eval", "{run}", "--episodes", "2.5"], "--episodes: bad value 2.5"),
    (["eval", "{run}", "--frames", "-100"], "--frames: bad value -100"),
    (["eval", "{run}", "--episodes", "2", "--frames", "100"], "--episodes and --frames"),
    (["eval", "{run}", "--epsilon", "1.5"], "--epsilon: bad value 1.5; expected a number in [0, 1]"),
    (["eval", "{run}", "--epsilon", "nan"], "--epsilon: bad value nan"),
    (["eval", "{run}", "--protocol", "sticky"], "--protocol: bad value sticky; expected one of"),
    (["eval", "{run}", "--protocol", "machado"], "expected no --protocol here: protocols are"),
    (["eval", "{run}", "--seed", "-1"], "--seed: bad value -1"),
    (["eval", "{run}", "--episode", "3"], "unknown option --episode; did you mean --episodes?"),
    (["eval", "{run}", "extra"], "unexpected argument 'extra'"),
    (["play", "{missing}"], "does not exist"),
    (["play", "{run}", "--frames", "0"], "--frames: bad value 0"),
    (["play", "{run}", "--fps", "0"], "--fps: bad value 0"),
    (["play", "{run}", "--checkpoint", "7"], "--checkpoint: bad value 7"),
    (["record", "{run}", "--out", "video.avi"], "--out: bad value video.avi; expected a path"),
    (["record", "{run}", "--episodes", "0"], "--episodes: bad value 0"),
    (["record", "{run}", "--scale", "0"], "--scale: bad value 0"),
    (["record", "{empty}"], "holds no checkpoint"),
    (["profile"], "qzoo profile needs train, act or env"),
    (["profile", "trian"], "got 'trian' (did you mean train?)"),
    (["profile", "env", "--steps", "0"], "--steps: bad value 0"),
    (["profile", "env", "--game", "ponng"], "--env: bad value ponng; expected"),
    (["profile", "env", "--env", "ponng"], "--env: bad value ponng; expected"),
    (["profile", "act", "--evn", "pong"], "unknown option --evn; did you mean --env?"),
    (["profile", "trian", "x"], "got 'trian' (did you mean train?)"),
    (["profile", "env", "--profiler", "gprof"], "--profiler: bad value gprof"),
    (["profile", "train", "--agent", "rainbw"], "--agent: bad value rainbw"),
]  # fmt: skip


@pytest.fixture(scope="module")
def folders(cartpole, tmp_path_factory):
    """A run and folders that are not runs, or hold broken networks."""
    from qzoo.run import checkpoint

    base = tmp_path_factory.mktemp("bad")
    (base / "empty").mkdir()
    (base / "foreign" / "checkpoints").mkdir(parents=True)
    (base / "foreign" / "checkpoints" / "latest.safetensors").write_bytes(b"\0" * 100)
    for name in ("bad_net", "odd_net", "bad_latest"):
        shutil.copytree(cartpole, base / name)
    with open(base / "bad_latest" / "checkpoints/networks/iteration-2.safetensors", "r+b") as f:
        f.seek(-1, os.SEEK_END)  # the last byte of the last array: a checksum catches it
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    nets = "checkpoints/networks/iteration-1.safetensors"
    (base / "bad_net" / nets).write_bytes(b"not a network")
    checkpoint.save(str(base / "odd_net" / nets), {"weights": [1, 2, 3]})
    checkpoint.save(str(base / "odd_net" / nets.replace("-1", "-0")), {"w": torch.zeros(3)})
    paths = {name: str(base / name) for name in ("empty", "foreign", "bad_net", "odd_net",
                                                 "bad_latest")}  # fmt: skip
    return {**paths, "run": str(cartpole), "missing": str(base / "missing")}


def _listing(folder):
    return sorted(os.path.relpath(os.path.join(root, n), folder)
                  for root, dirs, names in os.walk(folder) for n in dirs + names)  # fmt: skip


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_input_is_one_line_exit_2(argv, fragment, folders, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = _listing(folders["run"])
    assert main([a.format(**folders) for a in argv]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err and captured.out == ""
    assert err.count("\n") == 1 and err.startswith("qzoo: error: "), err
    assert fragment in err, err
    assert _listing(folders["run"]) == before and os.listdir(tmp_path) == []
