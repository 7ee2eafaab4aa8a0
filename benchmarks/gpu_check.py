"""Every GPU check of the fast path in one prepared run, as JSON lines and a short log.

    python benchmarks/gpu_check.py --out DIR [--budget 540] [--sections ...] [--tiny]
    benchmarks/gpu_check.sh [same options]     # on the GPU machine: installs wheels first

A GPU machine is lent for minutes at a time, so this is written to spend them
measuring: each section runs in a child process under its own deadline (a hang or a
crash costs that section, not the run), everything is written as it is measured
(`DIR/gpu_check.jsonl`, `DIR/gpu_check.log`), and `--tiny` runs the whole thing on a
CPU with tiny sizes first (the same code paths, CartPole and a small Atari replay).

Sections, in order (`--sections` picks some):
  env      the machine: GPU, driver, PyTorch, cores
  tests    the CUDA tests (captured, compiled, device replay, async on a GPU)
  replay   sampling from the device replay against the host replay
  speed    training frames/s on Pong at DQN Zoo's replay ratio: DQN and Rainbow at
           1, 8, 32, 64 and 128 environments, eager (host replay), compiled
           (`--compile`) and captured (`--capture --replay-device cuda`, and with
           `--capture-updates` 4 updates per call: captured_k4); the other
           agents captured at one setting; async acting beside the GPU learner (a
           thread: captured_async; a process: captured_process, acting on the half
           of the games that are ready: captured_process_ready); the
           cost of `--replay-compression`; GPU memory of each (`--done FILE` skips
           the settings an earlier run measured)
  pong     trains Pong with the fastest setting measured, for the minutes left,
           and writes its learning curve (results.csv and pong_curve.jsonl)
"""

import json
import os
import signal
import subprocess
import sys
import time
import traceback

from harness import emit_value, new_parser

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SECTIONS = ("env", "tests", "replay", "speed", "pong")
# Share of the budget each section may use at most (pong takes what is left).
SHARES = {"env": 0.03, "tests": 0.2, "replay": 0.06, "speed": 0.55}
MODES = {
    "eager": {},
    "compiled": {"compile": "true"},
    "captured": {"replay_device": "cuda", "capture": "true"},
}


def mode_options(mode):
    """The options of a mode name; captured_kN is --capture with N updates per call."""
    if mode.startswith("captured_k"):
        return {**MODES["captured"], "capture_updates": mode[len("captured_k") :]}
    return dict(MODES.get(mode, {}))


def per_call(num_envs):
    """Updates per captured call at `num_envs` environments: 4, or all those due per
    step (DQN Zoo's ratio: one per 4 agent steps) where fewer."""
    return f"captured_k{min(4, max(1, num_envs // 4))}"


def log(out, text):
    stamped = f"[{time.strftime('%H:%M:%S')}] {text}"
    print(stamped, file=sys.stderr, flush=True)
    with open(os.path.join(out, "gpu_check.log"), "a") as f:
        f.write(stamped + "\n")


# ---- the sections, each run in a child process ------------------------------------
def section_env(args):
    import platform

    import torch

    described = {"torch": torch.__version__, "python": platform.python_version(),
                 "cores": os.cpu_count(), "cuda": torch.cuda.is_available()}  # fmt: skip
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        described.update(gpu=props.name, gpu_memory=props.total_memory,
                         multiprocessors=props.multi_processor_count)  # fmt: skip
    import ale_py

    described["ale_py"] = ale_py.__version__
    emit_value("machine", 1, "", **described)


# The CUDA tests: each compiles (seconds apiece), so the agents that cover each path.
CUDA_TESTS = [
    "tests/learning/test_captured.py",
    "tests/acting/test_gpu_acting.py",
    "tests/learning/test_compiled.py",
]
CUDA_SELECTED = "on_a_gpu or gpu_async or gpu_actor or (cuda_steps and (dqn or rainbow))"


def section_tests(args):
    """The CUDA tests, their report written as they run (a deadline keeps what ran)."""
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfE",
               "--tb=short", *CUDA_TESTS, "-k", args.tests or CUDA_SELECTED]  # fmt: skip
    started = time.perf_counter()
    path = os.path.join(args.out, "cuda_tests.log")
    with open(path, "w") as report:
        done = subprocess.run(command, cwd=ROOT, stdout=report, stderr=subprocess.STDOUT,
                              check=False)  # fmt: skip
    with open(path) as report:
        lines = report.read().strip().splitlines()
    emit_value(
        "cuda_tests_exit_code",
        done.returncode,
        "",
        seconds=time.perf_counter() - started,
        summary=lines[-1] if lines else "",
    )


def settings(args):
    """The speed section's environments, counts and sizes (tiny: CartPole-sized)."""
    if args.tiny:  # every kind of setting once, in minutes on two cores
        return {"env": "pong", "counts": (8,), "capacity": 4096, "warmup": 256,
                "seconds": 1.0, "device": "cpu"}  # fmt: skip
    return {"env": "pong", "counts": (1, 8, 32, 64, 128), "capacity": 2**17, "warmup": 2048,
            "seconds": 10.0, "device": "cuda"}  # fmt: skip


def trainer_for(agent, num_envs, options, s):
    from qzoo.configuration import build_config
    from qzoo.run.trainer import Trainer

    base = {
        "env": s["env"],
        "num_envs": str(num_envs),
        "device": s["device"],
        "replay_capacity": str(s["capacity"]),
        "progress": "false",
        "tensorboard": "false",
        "seed": "1",
        "min_replay_capacity_fraction": str(max(s["warmup"], 4 * 32) / s["capacity"]),
    }
    options = {**base, **options}
    if s["device"] == "cpu" and options.get("replay_device") == "cuda":
        options["replay_device"] = "cpu"
    return Trainer(build_config(agent, options))


def measure(args, agent, num_envs, mode, options, s):
    """Frames/s of one training phase sized to about `seconds`, after a phase that
    fills the replay and makes the first updates (compiling, for compiled modes)."""
    import torch

    from qzoo.run import threads

    cuda = s["device"] == "cuda"
    trainer = trainer_for(agent, num_envs, options, s)
    threads.apply(trainer.config)
    config = trainer.config
    started = time.perf_counter()
    trainer.train_phase(config.min_replay_size * config.action_repeats + 64 * config.learn_period)
    first = time.perf_counter() - started
    # Sized from a guess (a probe phase would make the environments a third time).
    kind = mode.split("_")[0]
    guess = ESTIMATES.get(kind, 2_000) * min(1.0, (num_envs / 128) ** 0.6)
    guess *= 0.45 if agent in ("rainbow", "iqn") else 1.0
    frames = int(guess * s["seconds"]) // (num_envs * 4) * (num_envs * 4)
    trainer.learner.pop_statistics()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    parts = time_parts(trainer) if config.acting == "serial" else {}
    stats = trainer.train_phase(max(frames, num_envs * 4 * 8))
    if cuda:
        torch.cuda.synchronize()
    updates = trainer.learner.pop_statistics()["num_updates"]
    described = {"agent": agent, "num_envs": num_envs, "mode": mode, "acting": config.acting,
                 "options": options,
                 "device": s["device"], "first_phase_seconds": round(first, 2),
                 "updates_per_second": updates / stats["duration"],
                 "agent_steps_per_second": stats["steps_per_second"],
                 "seconds": stats["duration"],
                 **{f"{k}_fraction": v / stats["duration"] for k, v in parts.items()}}  # fmt: skip
    if cuda:
        described["gpu_peak_bytes"] = torch.cuda.max_memory_allocated()
        from torch._dynamo.utils import counters

        described["cudagraph_skips"] = sum(counters["inductor"].get(k, 0)
                                           for k in ("cudagraph_skips",))  # fmt: skip
    if parts:  # the rate once the games run, without the phase's first reset
        frames = stats["frame_rate"] * stats["duration"]
        described["steady_frames_per_second"] = frames / (stats["duration"] - parts["env_reset"])
    emit_value("train_frames_per_second", stats["frame_rate"], "frames/s", **described)
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    return stats["frame_rate"]


# Frames/s at 128 environments, to size a timed phase (the first GPU runs' figures).
ESTIMATES = {"captured": 12_000, "compiled": 6_600, "eager": 2_500}


def time_parts(trainer):
    """Seconds of the serial loop's parts, filled in as it runs: the learner's updates
    (host time: queueing them, and any wait for the GPU), the policy's forward pass (its
    copy of the actions to the host waits for the GPU's queued work) and the games'
    steps and the phase's first reset of all of them (ale-py; a reset reloads each
    game, about a second for 128 of them: part of a phase, but not of the steady rate)."""
    parts = {"learn": 0.0, "policy": 0.0, "env_step": 0.0, "env_reset": 0.0}

    def timed(name, function):
        def call(*a, **k):
            begin = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                parts[name] += time.perf_counter() - begin

        return call

    trainer.updates.learn_due = timed("learn", trainer.updates.learn_due)
    actor = trainer.actor
    actor.policy = _TimedPolicy(actor.policy, timed)
    make_env = actor.make_env

    def make(*a, **k):
        env = make_env(*a, **k)
        env.step = timed("env_step", env.step)
        env.reset = timed("env_reset", env.reset)
        return env

    actor.make_env = make
    return parts


class _TimedPolicy:
    def __init__(self, policy, timed):
        self._policy, self._call = policy, timed("policy", policy.__call__)

    def __call__(self, *a, **k):
        return self._call(*a, **k)

    def __getattr__(self, name):
        return getattr(self._policy, name)


def speed_plan(counts):
    """(agent, environments, mode name, options) in the order they are measured: the
    headline first (DQN at the most environments, captured against eager against
    compiled), then the fewer environments, Rainbow, async acting, compressed replay and
    the other agents, so that a budget that runs out cuts the least telling ones."""
    big, most = counts[-2] if len(counts) > 2 else counts[-1], counts[-1]
    async_options = {"acting": "async", "publish_period": "16"}
    plan = [("dqn", most, mode, MODES[mode]) for mode in ("captured", "eager", "compiled")]
    pairs = dict.fromkeys((("dqn", most), ("rainbow", most), ("dqn", big)))  # --tiny: big = most
    plan += [(agent, count, per_call(count), mode_options(per_call(count)))
             for agent, count in pairs]  # fmt: skip
    plan += [("rainbow", most, mode, MODES[mode]) for mode in ("captured", "eager")]
    plan += [("dqn", big, "captured_async", {**MODES["captured"], **async_options})]
    process = {**MODES["captured"], **async_options, "actor_process": "true"}
    plan += [("dqn", big, "captured_process", process),
             ("dqn", big, "captured_process_ready", {**process, "env_batch_size": str(big // 2)})]  # fmt: skip
    for count in reversed(counts[:-1]):
        plan += [("dqn", count, mode, MODES[mode]) for mode in ("captured", "eager")]
    plan += [
        ("dqn", big, f"compiled_replay_{codec}", {**MODES["compiled"], "replay_compression": codec})
        for codec in ("none", "lz4")
    ]
    plan += [("dqn", big, "eager_async", async_options), ("rainbow", most, "compiled",
                                                           MODES["compiled"])]  # fmt: skip
    for count in reversed(counts[:-1]):
        plan += [("rainbow", count, mode, MODES[mode]) for mode in ("captured", "eager")]
    plan += [(agent, big, "captured", MODES["captured"])
             for agent in ("double_q", "prioritized", "c51", "qrdqn", "iqn")]  # fmt: skip
    for count in reversed(counts[:-1]):
        plan += [(agent, count, "compiled", MODES["compiled"]) for agent in ("dqn", "rainbow")]
    return plan


def measured(path):
    """(agent, environments, mode) already measured in a JSON lines file."""
    done = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if record["name"] == "train_frames_per_second":
                    done.add((record["agent"], record["num_envs"], record["mode"]))
    return done


def section_speed(args):
    s = settings(args)
    deadline = time.time() + args.seconds_left
    skip = measured(args.done)
    for agent, count, mode, options in speed_plan(s["counts"]):
        if (agent, count, mode) in skip:
            continue
        if time.time() > deadline - 15:
            emit_value("skipped", 1, "", agent=agent, num_envs=count, mode=mode)
            continue
        try:
            rate = measure(args, agent, count, mode, options, s)
            log(args.out, f"speed: {agent} x{count} {mode}: {rate:,.0f} frames/s")
        except Exception:  # noqa: BLE001 (recorded; the next setting still runs)
            log(args.out, f"speed: {agent} x{count} {mode} failed:\n{traceback.format_exc()}")
            emit_value(
                "failed",
                1,
                "",
                agent=agent,
                num_envs=count,
                mode=mode,
                error=traceback.format_exc().strip().splitlines()[-1],
            )


def section_replay(args):
    devices = "host,cpu" if args.tiny else "host,cuda"
    command = [sys.executable, os.path.join(HERE, "device_replay.py"), "--env", "noise",
               "--devices", devices, "--rounds", "3", "--seconds", "1",
               "--capacity", "20000" if args.tiny else "100000"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                          timeout=max(10, args.seconds_left))  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            emit_value(
                "replay_" + record.pop("name"), record.pop("value"), record.pop("unit"), **record
            )
    if done.returncode:
        log(args.out, "replay failed:\n" + done.stderr[-3000:])


def fastest(out):
    """The measured setting with the most frames/s (captured DQN preferred on ties)."""
    best = None
    path = os.path.join(out, "gpu_check.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            usable = record["name"] == "train_frames_per_second" and record["agent"] == "dqn"
            if (
                usable
                and "replay_" not in record["mode"]
                and (best is None or record["value"] > best["value"])
            ):
                best = record
    return best


def section_pong(args):
    """Trains DQN on Pong with the fastest measured setting for the time left, one
    iteration per 250k frames, evaluating each; writes the learning curve."""
    from qzoo.cli.main import main

    best = fastest(args.out) or {"mode": "captured", "num_envs": 64, "acting": "serial"}
    options = dict(best.get("options") or mode_options(best["mode"]))
    if args.tiny:
        options = {k: ("cpu" if v == "cuda" else v) for k, v in options.items()}
    num_envs = best["num_envs"]
    run_dir = os.path.join(args.work, "pong_run")
    # Pong learns on far fewer frames than DQN Zoo's schedules allow for (Adam, a short
    # epsilon decay and frequent target copies, as CleanRL's dqn_atari): see the docs.
    argv = ["train", "dqn", "--env", "pong", "--run-dir", run_dir, "--num-envs", str(num_envs),
            "--device", "cpu" if args.tiny else "cuda", "--iterations", "10",
            "--train-frames", "8000" if args.tiny else "1000000",
            # Long enough for each environment to finish a game (about 3,500 frames lost
            # 21-0, several times that when the games get close).
            "--eval-frames", str(num_envs * 4 * (50 if args.tiny else 2500)),
            "--progress", "false",
            "--optimizer", "adam", "--learning-rate", "1e-4",
            "--exploration-epsilon-end-value", "0.01",
            "--exploration-epsilon-decay-frame-fraction", "0.1",
            "--target-network-update-period", "4000",
            "--min-replay-capacity-fraction", "0.1",
            "--replay-capacity", "200000" if not args.tiny else "8192"]  # fmt: skip
    for key, value in options.items():
        argv += ["--" + key.replace("_", "-"), value]
    log(args.out, f"pong: qzoo {' '.join(argv)}")
    started = time.time()
    code = None
    try:
        code = main(argv)
        if code == 2 and os.path.isdir(run_dir) and time.time() - started < 30:
            # An earlier check's run of other options (a second check on a warm machine
            # with another fastest setting): set aside, and a new run in its place.
            aside = f"{run_dir}-{int(started)}"
            os.replace(run_dir, aside)
            log(args.out, f"pong: {run_dir} held a run of other options, moved to {aside}")
            code = main(argv)
    finally:
        log(args.out, f"pong: qzoo exit {code}, stopped after {time.time() - started:.0f} s")


def run_section(args, name, seconds):
    """Runs one section in a child process; at its deadline the child gets Ctrl-C
    (a training run then stops cleanly), and is killed a little later."""
    command = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--out",
        args.out,
        "--work",
        args.work,
        "--seconds-left",
        str(seconds),
        "--done",
        args.done,
        "--tests",
        args.tests,
    ]
    command += ["--tiny"] if args.tiny else []
    started = time.time()
    log(args.out, f"{name}: start ({seconds:.0f} s at most)")
    child = subprocess.Popen(command, cwd=ROOT)
    grace = min(20.0, seconds / 4)
    try:
        child.wait(timeout=seconds - grace)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log(args.out, f"{name}: stopped at its deadline ({seconds:.0f} s)")
    log(args.out, f"{name}: exit {child.returncode} after {time.time() - started:.0f} s")


def keep_curve(args):
    """The Pong run's results.csv, and one JSON line per iteration of it."""
    import csv
    import shutil

    path = os.path.join(args.work, "pong_run", "results.csv")
    if not os.path.exists(path):
        return
    shutil.copy(path, os.path.join(args.out, "pong_results.csv"))
    with open(path) as f:
        for row in csv.DictReader(f):
            emit_value(
                "pong_eval_episode_return",
                float(row["eval_episode_return"]),
                "return",
                iteration=int(row["iteration"]),
                frame=int(row["frame"]),
                wall_time=float(row["wall_time"]),
                train_episode_return=float(row["train_episode_return"]),
                train_frame_rate=float(row["train_frame_rate"]),
            )


def main():
    parser = new_parser(__doc__, "gpu_check.jsonl", os.environ.get("OUT", "gpu_check_out"))
    parser.add_argument("--work", default="/tmp/gpu_check")
    parser.add_argument("--budget", type=float, default=540, help="seconds for everything")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--tiny", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument(
        "--done",
        default="",
        help="a gpu_check.jsonl of an earlier run: settings measured there are not measured again",
    )
    parser.add_argument(
        "--tests",
        default="",
        help="pytest -k expression over the CUDA tests (default: all of them)",
    )
    parser.add_argument("--child", default="")
    parser.add_argument("--seconds-left", type=float, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    if args.child:
        {"env": section_env, "tests": section_tests, "speed": section_speed,
         "replay": section_replay, "pong": section_pong}[args.child](args)  # fmt: skip
        return
    deadline = time.time() + args.budget
    chosen = [s for s in SECTIONS if s in args.sections.split(",")]
    for name in chosen:
        left = deadline - time.time()
        # The last section chosen takes what is left.
        seconds = left if name == chosen[-1] else min(left, SHARES[name] * args.budget)
        if seconds < 15:
            log(args.out, f"{name}: skipped, {left:.0f} s left")
            continue
        run_section(args, name, seconds)
        if name == "pong":
            keep_curve(args)
    log(args.out, "done")


if __name__ == "__main__":
    main()
