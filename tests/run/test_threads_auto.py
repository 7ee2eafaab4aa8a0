"""`--threads 0` (auto) from the cores that are free at the start, and resumes that keep
the count their run ran with (threads.py, rundir.py)."""

import dataclasses
import itertools
import json
import threading
import time

import pytest
import torch
from helpers import replacing

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.run import run_folder, thread_record, threads

# /proc/stat before and after a window: cpu0 busy all along (user + system), cpu1 idle
# (idle + iowait). Columns: user nice system idle iowait irq softirq steal guest guest_nice.
BEFORE = """cpu  1000 0 200 5000 100 0 10 0 0 0
cpu0 800 0 150 1000 50 0 5 0 0 0
cpu1 200 0 50 4000 50 0 5 0 0 0
intr 12345 0 0
ctxt 6789
"""
AFTER = """cpu  1025 0 205 5023 102 0 10 0 0 0
cpu0 825 0 155 1000 50 0 5 0 0 0
cpu1 200 0 50 4023 52 0 5 0 0 0
intr 12999 0 0
ctxt 7000
"""


@pytest.fixture(autouse=True)
def lock_file(monkeypatch, tmp_path):
    monkeypatch.setattr(threads, "LOCK", str(tmp_path / "qzoo-threads.lock"))


def reader(*texts):
    """A stand-in for read_proc_stat that gives `texts` one after the other."""
    texts = iter(texts)
    return lambda: next(texts)


def busy(before, after, cores=(0, 1)):
    return threads.busy_cores(cores, read=reader(before, after), sleep=lambda s: None)


def aggregate_only(text):
    return "\n".join(line for line in text.splitlines() if not line.startswith("cpu") or
                     line.startswith("cpu "))  # fmt: skip


def test_proc_stat_arithmetic():
    times = threads.cpu_times(BEFORE)
    assert set(times) == {"cpu", "cpu0", "cpu1"}
    assert times["cpu0"] == (955, 2005)  # busy = total - idle - iowait
    assert times["cpu"] == (1210, 6310)
    assert busy(BEFORE, AFTER) == pytest.approx(1.0)  # cpu0 busy, cpu1 idle
    assert busy(BEFORE, AFTER, cores=(1,)) == pytest.approx(0.0)  # affinity: cpu1 only
    assert busy(BEFORE, AFTER, cores=(0,)) == pytest.approx(1.0)
    idle = BEFORE.replace("cpu0 800 0 150 1000", "cpu0 800 0 150 1025")
    idle = idle.replace("cpu1 200 0 50 4000", "cpu1 200 0 50 4025")
    assert busy(BEFORE, idle) == pytest.approx(0.0)  # a lone machine
    assert busy(BEFORE, BEFORE) is None  # no jiffies passed: nothing measured
    # Without per-core lines, the machine's busy fraction (30 of 55 jiffies) times the cores.
    assert busy(aggregate_only(BEFORE), aggregate_only(AFTER)) == pytest.approx(2 * 30 / 55)
    # A core /proc/stat does not list falls back to the whole machine's line too.
    assert busy(BEFORE, AFTER, cores=(0, 1, 2)) == pytest.approx(3 * 30 / 55)


def test_unreadable_proc_stat_measures_nothing():
    slept = []
    assert threads.busy_cores((0, 1), read=lambda: None, sleep=slept.append) is None
    assert slept == []  # nothing to wait for
    assert threads.busy_cores((0, 1), read=reader(BEFORE, None), sleep=slept.append) is None


@pytest.fixture
def pong():
    return build_config("dqn", {"env": "pong"})


@pytest.fixture
def machine(monkeypatch):
    """Sets the usable cores and the busy cores busy_cores() measures (None: unreadable)."""

    def set_machine(usable, busy_cores):
        monkeypatch.setattr(threads, "usable_cores", lambda: usable)
        monkeypatch.setattr(threads, "busy_cores", lambda *a, **k: busy_cores)

    return set_machine


def auto(config, domain="atari", cuda=False, resumed=None):
    """(auto's count, its notes)."""
    notes = []
    return threads.auto_threads(config, domain, cuda, resumed, notes), notes


@pytest.mark.parametrize(
    ("usable", "busy_cores", "expected", "noted"),
    [
        (2, 0.03, 2, False),  # a lone run on 2 cores: both (half of them before)
        (2, 0.98, 1, True),  # beside a run that keeps one core busy
        (2, 1.9, 1, True),  # never fewer than 1
        (2, 0.4, 2, False),  # rounded: 0.4 of a core busy is not a core
        (16, 0.2, 4, False),  # at most 4
        (16, 12.9, 3, True),  # others busy below the cap
        (1, 0.1, 1, False),  # an affinity of one core
        (2, None, 1, False),  # /proc/stat unreadable: half the usable cores
        (8, None, 4, False),
    ],
)
def test_auto_from_free_cores(pong, machine, usable, busy_cores, expected, noted):
    machine(usable, busy_cores)
    count, notes = auto(pong)
    assert count == expected and len(notes) == noted
    if noted:
        assert f"keep {busy_cores:.1f} of the {usable} usable cores busy" in notes[0]


def test_runs_started_together_measure_one_after_another(pong, monkeypatch):
    """Measuring at once, each would see the other asleep and take every core."""
    spans = []

    def measure(*args, **kwargs):
        start = time.monotonic()
        time.sleep(0.1)
        spans.append((start, time.monotonic()))
        return 0.0

    monkeypatch.setattr(threads, "busy_cores", measure)
    runs = [threading.Thread(target=threads.free_threads, args=(pong,)) for _ in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    spans.sort()
    assert len(spans) == 3 and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_what_free_cores_do_not_change(pong, machine):
    machine(2, 0.0)
    replace = dataclasses.replace
    assert auto(pong, cuda=True) == (1, [])
    assert auto(replace(pong, torso="minatar_cnn")) == (1, [])
    assert auto(replace(pong, torso="dopamine_cnn")) == (2, [])
    assert auto(replace(pong, pin_threads=True)) == (1, [])
    # --acting async: one core for the actor thread, and no note for it.
    assert auto(replace(pong, acting="async")) == (1, [])
    machine(4, 0.0)
    assert auto(replace(pong, acting="async")) == (3, [])
    assert auto(replace(pong, ray=True)) == (2, [])  # half: its actors start later


def test_a_resume_keeps_its_count(pong, machine):
    machine(8, 7.0)  # whatever the load now
    assert auto(pong, resumed=3) == (3, [])
    assert auto(pong, resumed=0) == (4, [])  # no record: half the usable cores, as before
    cartpole = build_config("dqn", {"env": "CartPole-v1"})
    assert auto(cartpole, "gym", resumed=2) == (2, [])
    assert auto(cartpole, "gym", resumed=0) == (1, [])
    assert auto(pong, cuda=True, resumed=3) == (1, [])  # on a GPU
    machine(2, 0.0)
    assert auto(pong, resumed=3) == (2, [])  # fewer cores: another machine


@pytest.fixture
def torch_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_apply_notes_a_busy_machine(pong, machine, torch_threads, capsys):
    pong = dataclasses.replace(pong, device="cpu")
    machine(2, 1.0)
    assert threads.apply(pong) == 1 == torch.get_num_threads()
    err = capsys.readouterr().err
    assert err.startswith("qzoo: note: --threads auto: 1 thread,") and err.count("\n") == 1
    machine(2, 0.0)
    assert threads.apply(pong) == 2 == torch.get_num_threads()
    assert threads.apply(dataclasses.replace(pong, threads=3)) == 3  # explicit: as asked
    assert capsys.readouterr().err == ""
    machine(2, 1.0)
    notes = []
    assert threads.apply(pong, notes=notes) == 1 and len(notes) == 1  # for qzoo train
    assert capsys.readouterr().err == ""


def test_a_refused_run_says_only_why(machine, torch_threads, capsys, tmp_path):
    machine(2, 1.0)  # auto would note the busy core, but only for a run that starts
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--replay-capacity", "100000000", "--run-dir", str(run_dir)]
    assert main([*argv, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qzoo: error:") and err.count("\n") == 1 and not run_dir.exists()


def write_record(run_dir, text):
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / thread_record.THREADS).write_text(text)


def test_saved_threads(tmp_path):
    run_dir = tmp_path / "run"
    assert thread_record.saved_threads(str(run_dir)) is None  # no folder
    write_record(run_dir, '{"threads": 3, "device": "cpu"}')
    assert thread_record.saved_threads(str(run_dir)) is None  # no checkpoint: a new run
    (run_dir / run_folder.CHECKPOINT).write_bytes(b"")
    assert thread_record.saved_threads(str(run_dir)) == 3
    write_record(run_dir, '{"threads": 1, "device": "cuda"}')
    assert thread_record.saved_threads(str(run_dir)) is None  # last ran on a GPU: afresh
    for bad in ("", "not json", "[]", '{"threads": 0, "device": "cpu"}',
                '{"threads": true, "device": "cpu"}', '{"threads": 2}'):  # fmt: skip
        write_record(run_dir, bad)
        assert thread_record.saved_threads(str(run_dir)) == 0, bad  # as a run without a record
    (run_dir / thread_record.THREADS).unlink()
    assert thread_record.saved_threads(str(run_dir)) == 0  # saved before the record existed


ARGS = ["--env", "CartPole-v1", "--train-frames", "200", "--eval-frames", "50",
        "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
        "--no-tensorboard", "--no-progress", "--device", "cpu"]  # fmt: skip


@pytest.mark.skipif(threads.usable_cores() < 2, reason="a resumed count is capped at the "
                    "usable cores: with one, the run's 2 and auto's 1 are both 1")  # fmt: skip
def test_cli_resume_keeps_the_count(tmp_path, torch_threads):
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", *ARGS, "--run-dir", str(run_dir), "--iterations", "1"]

    def record():
        return json.loads((run_dir / thread_record.THREADS).read_text())

    assert main(argv) == 0
    assert record() == {"threads": 1, "device": "cpu"}  # auto on CartPole: 1
    write_record(run_dir, '{"threads": 2, "device": "cpu"}')  # as if it had run with 2
    torch.set_num_threads(1)
    assert main(argv) == 0  # the same command, the run complete: nothing trains
    assert torch.get_num_threads() == 2  # the run's 2, not CartPole's auto 1
    assert json.loads((run_dir / "config.json").read_text())["threads"] == 0  # as asked
    more = ["--iterations", "2", "--accept-changes", "iterations", "--threads", "1"]
    assert main(replacing(argv, more)) == 0  # an explicit count wins, and is what it ran with
    assert torch.get_num_threads() == 1 and record()["threads"] == 1
