"""qzoo next to its peers, measured in one invocation, as JSON lines.

    python benchmarks/peers.py [--envs pong,cartpole] [--rounds 3] [--threads 1]
                               [--peers qzoo,cleanrl,sb3[,qzoo_compiled,...]] [--cleanrl DIR]

Runs qzoo, CleanRL (`cleanrl/dqn_atari.py` on Pong, `cleanrl/dqn.py` on CartPole) and
Stable-Baselines3's DQN one after the other, each in a fresh child process, in
`--rounds` rounds (the order rotates every round), with the same settings:

  pong      Nature CNN, batch 32, one update per 4 agent steps, replay 100k, Adam 1e-4,
            a target copy every 1,000 agent steps, epsilon 0.01 once learning starts
  cartpole  CleanRL dqn.py's: an MLP (qzoo: two torso layers and its head's hidden
            layer, all `--cartpole-mlp-hidden` wide, 120 by default: 2.75x the
            arithmetic of CleanRL's and SB3's 120 and 84, which 72 matches), batch 128,
            one update every 10 steps, replay 10k, Adam 2.5e-4, a target copy every
            500 steps, epsilon 0.05 once learning starts

Every run stores `--*-warmup` transitions first (learning starts there), then is timed
over the next `--*-steps` agent steps (each with its share of updates). Each prints a
`peer_run` line: agent steps/s (and per second of the process's CPU time, all its
threads: steadier than wall time on a shared machine), peak RSS, and its replay's bytes: allocated, resident
at the end (pages written so far, read from /proc/self/pagemap) and resident per
stored transition, which times the capacity is the replay's RSS once full. Then, per environment, the medians (`peer_median`) and the
median over rounds of qzoo's ratio to each peer (`peer_ratio`): pairs from one round
ran closest in time, which matters on a shared machine.

Each peer runs its own pipeline (CleanRL and SB3: Gymnasium's ALE with Python
wrappers; qzoo: ale-py's vector environment), as a user would. Every process gets the
same PyTorch thread count (`--threads`, also exported as OMP_NUM_THREADS).

`--peers` may also name qzoo variants (VARIANTS below): qzoo_compiled (`--compile`),
qzoo_bfloat16 (`--precision bfloat16`), qzoo_bfloat16_compiled (both), the async ones
on Pong, and on CartPole qzoo_cleanrl_mlp (CleanRL's 120, 84 network exactly:
`--mlp-layers 120,84`), its compiled form, and that on 8 environments; each is
compared with every non-qzoo peer.

Peers are found, never downloaded: Stable-Baselines3 from the installed
`stable_baselines3` package (`pip install stable-baselines3 opencv-python-headless`),
CleanRL's single-file scripts from a checkout of its repository given by `--cleanrl` or
the QZOO_CLEANRL environment variable (the folder holding cleanrl/ and cleanrl_utils/).
A missing peer prints one `peer_skipped` line and the rest still run. CleanRL's scripts
are run unmodified; the child only maps the two Gymnasium 0.x wrapper names they use
to their Gymnasium 1.x names, runs their vector environment with 0.29's same-step
autoreset and its infos' names (without which dqn.py stops at CartPole's first
truncated episode: KeyError 'final_observation'), and counts environment steps to
time the window.
"""

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ is not a package
from harness import emit as record
from harness import new_parser
from peer_baselines import cleanrl_folder, run_cleanrl, run_sb3
from peer_common import ENVS, memory, replay_figures, resident_bytes  # noqa: F401 (tests)

PEERS = ("qzoo", "cleanrl", "sb3")
# `--qzoo-before DIR` adds "qzoo_before": qzoo from another source tree (an older commit),
# run as "qzoo" is, so that before and after come from one invocation.
# qzoo with options that change its arithmetic: --compile (its compile time falls
# before the timed window, in the first learning step) and --precision bfloat16; and
# qzoo acting beside its learner (--acting async --prefetch-targets: the learner's thread,
# and the actor's and prefetcher's threads, one PyTorch thread each whatever --threads
# says: two cores busy; compare it with peers given --threads 2), and the same with the
# learner's thread on a core of its own (--pin-threads).
ASYNC = {"precision": "bfloat16", "acting": "async", "prefetch_targets": True, "threads": 1}
CLEANRL_MLP = {"mlp_layers": "120,84"}
PROCESS = {"acting": "async", "actor_process": True, "pin_threads": True}
VARIANTS = {"qzoo_compiled": {"compile": True}, "qzoo_bfloat16": {"precision": "bfloat16"},
            # serial on one PyTorch thread whatever --threads says (beside the async ones)
            "qzoo_bfloat16_1thread": {"precision": "bfloat16", "threads": 1},
            "qzoo_bfloat16_compiled": {"precision": "bfloat16", "compile": True},
            "qzoo_bfloat16_async": ASYNC,
            "qzoo_bfloat16_async_pinned": {**ASYNC, "pin_threads": True},
            "qzoo_async_pinned": {**ASYNC, "precision": "float32", "pin_threads": True},
            "qzoo_bfloat16_actor_process": {**ASYNC, "pin_threads": True, "actor_process": True},
            # CartPole only: CleanRL dqn.py's own network (--mlp-layers 120,84), compiled,
            # and acting on 8 environments at once (CleanRL's dqn.py refuses more than one;
            # the ratio stays one update of 128 per 10 agent steps).
            "qzoo_cleanrl_mlp": CLEANRL_MLP,
            "qzoo_cleanrl_mlp_compiled": {**CLEANRL_MLP, "compile": True},
            "qzoo_cleanrl_mlp_compiled_envs8": {**CLEANRL_MLP, "compile": True, "num_envs": 8},
            # ... and acting beside the learner, without target prefetching (a 4-input
            # MLP's target pass costs less than the handoff).
            "qzoo_cleanrl_mlp_async_pinned": {**CLEANRL_MLP, "acting": "async", "threads": 1,
                                              "pin_threads": True},
            "qzoo_cleanrl_mlp_compiled_async_pinned": {**CLEANRL_MLP, "acting": "async",
                                                       "threads": 1, "pin_threads": True,
                                                       "compile": True},
            # ... and the actor in a process of its own (--actor-process).
            "qzoo_cleanrl_mlp_actor_process": {**CLEANRL_MLP, **PROCESS},
            "qzoo_cleanrl_mlp_compiled_actor_process": {**CLEANRL_MLP, **PROCESS,
                                                        "compile": True}}  # fmt: skip
CHILDREN = PEERS + tuple(VARIANTS) + ("qzoo_before",)


def emit(name, **fields):
    record({"name": name, **fields})


# ---- children: one run of one peer, result written as JSON to a file ---------------


def qzoo_options(env, warmup, threads, mlp_hidden=120, variant=None):
    """qzoo's options for the peers' settings of `env` ("pong" or "cartpole")."""
    s = ENVS[env]
    pong = env == "pong"
    repeats = 4 if pong else 1
    options = {
        "env": "pong" if pong else "CartPole-v1", "threads": threads, "progress": False,
        "tensorboard": False, "replay_capacity": s["capacity"], "batch_size": s["batch"],
        "learn_period": s["every"] * repeats, "optimizer": "adam", "learning_rate": s["lr"],
        "target_network_update_period": s["target"] * repeats,
        "min_replay_capacity_fraction": warmup / s["capacity"],
        # Decay from 1 at the first learning step to the final epsilon right away.
        "exploration_epsilon_end_value": s["epsilon"],
        "exploration_epsilon_decay_frame_fraction": 1e-9,
    }  # fmt: skip
    if not pong:
        options.update(mlp_hidden=mlp_hidden, max_global_grad_norm=0.0, optimizer_epsilon=1e-8)
    else:
        options.update(optimizer_epsilon=1e-8)
    options.update(VARIANTS.get(variant, {}))
    return options


def run_qzoo(env, warmup, steps, threads, mlp_hidden=120, variant=None):
    from qzoo.configuration import build_config
    from qzoo.run import threads as qzoo_threads
    from qzoo.run.trainer import Trainer

    repeats = 4 if env == "pong" else 1
    config = build_config("dqn", qzoo_options(env, warmup, threads, mlp_hidden, variant))
    qzoo_threads.apply(config)
    trainer = Trainer(config)
    # Fill the replay to the warm-up and take the first learning step, then time.
    trainer.train_phase(config.min_replay_size * repeats + config.learn_period)
    # CPU time of this process and of its waited-for children: --actor-process's actor
    # is one, joined at the end of the phase.
    cpu = sum(os.times()[:4])
    stats = trainer.train_phase(steps * repeats)
    cpu = sum(os.times()[:4]) - cpu
    storage = trainer.replay.storage
    # The action array holds the flags too up to 32 actions (row_arrays counts it once);
    # a checkout from before that packing (qzoo_before) has four arrays.
    rows = getattr(storage, "row_arrays", None) or (storage.actions, storage.rewards, storage.flags)
    arrays = [storage.frames, *rows]
    return {
        "agent_steps_per_second": stats["steps_per_second"],
        "window_seconds": stats["duration"],
        "learner_wait_fraction": stats.get("learner_wait_fraction", math.nan),
        # The largest waited-for child's peak: --actor-process's actor (a fork, sharing
        # its unchanged pages with this process, so not to be added to peak_rss).
        "peak_rss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
        "agent_steps_per_cpu_second": steps / cpu,
        **replay_figures(arrays, trainer.replay.size),
    }


def child(args):
    os.chdir(tempfile.mkdtemp(prefix="qzoo-peers-"))  # CleanRL writes runs/ here
    if args.child.startswith("qzoo"):
        result = run_qzoo(args.env, args.warmup, args.steps, args.threads,
                          args.cartpole_mlp_hidden, args.child)  # fmt: skip
    elif args.child == "cleanrl":
        result = run_cleanrl(args.env, args.warmup, args.steps, args.threads, args.cleanrl)
    else:
        result = run_sb3(args.env, args.warmup, args.steps, args.threads)
    result["peak_rss"] = memory("VmHWM")
    with open(args.result, "w") as f:
        json.dump(result, f)


# ---- parent: rounds of children, medians and ratios ---------------------------------


def missing(peer, args):
    """Why `peer` cannot run here, or None."""
    if peer == "cleanrl" and cleanrl_folder(args.cleanrl) is None:
        return ("no CleanRL checkout: pass --cleanrl DIR or set QZOO_CLEANRL to a folder "
                "holding cleanrl/ and cleanrl_utils/ from CleanRL's repository")  # fmt: skip
    if peer == "cleanrl":
        import gymnasium

        if not hasattr(gymnasium.vector, "AutoresetMode"):  # peer_baselines.run_cleanrl
            return (f"Gymnasium {gymnasium.__version__} has no same-step autoreset, which "
                    "CleanRL's scripts need: pip install 'gymnasium>=1.1'")  # fmt: skip
    if peer == "sb3":
        import importlib.util

        for module in ("stable_baselines3", "cv2"):
            if importlib.util.find_spec(module) is None:
                return (f"no {module} module: pip install stable-baselines3 "
                        "opencv-python-headless")  # fmt: skip
    return None


def one_run(peer, env, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [
            sys.executable, os.path.abspath(__file__), "--child", peer, "--env", env,
            "--warmup", str(getattr(args, f"{env}_warmup")),
            "--steps", str(getattr(args, f"{env}_steps")), "--threads", str(args.threads),
            "--cartpole-mlp-hidden", str(args.cartpole_mlp_hidden),
            "--result", out.name, "--cleanrl", cleanrl_folder(args.cleanrl) or "",
        ]  # fmt: skip
        environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        if peer == "qzoo_before":
            environment["PYTHONPATH"] = os.path.abspath(args.qzoo_before)
        done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            return {"error": f"exit {done.returncode}: {' '.join(tail)}"}
        with open(out.name) as f:
            return json.load(f)


def machine(args):
    import torch

    return {"machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)),
            "threads": args.threads, "torch": torch.__version__,
            "load_average": os.getloadavg()[0]}  # fmt: skip


def ratios(runs, peer, other):
    """qzoo/peer per round, for rounds where both ran."""
    by_round = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["peer"]] = run
    pairs = [r for r in by_round.values() if peer in r and other in r]
    if not pairs:
        return None
    out = {}
    for key in (
        "agent_steps_per_second",
        "agent_steps_per_cpu_second",
        "peak_rss",
        "replay_bytes_per_transition",
    ):
        if all(key in r[peer] and key in r[other] for r in pairs):
            out[key] = statistics.median(r[peer][key] / r[other][key] for r in pairs)
    out["rounds"] = len(pairs)
    return out


def parent(args):
    peers = args.peers.split(",")
    if args.qzoo_before:
        peers.insert(1, "qzoo_before")
    for name in [p for p in peers if p not in CHILDREN] + [e for e in args.envs.split(",")
                                                        if e not in ENVS]:  # fmt: skip
        sys.exit(f"peers.py: error: unknown peer or env {name!r}; peers: {', '.join(CHILDREN[:-1])}; "
                 f"envs: {', '.join(ENVS)}")  # fmt: skip
    for peer in list(peers):
        reason = missing(peer, args)
        if reason:
            emit("peer_skipped", peer=peer, reason=reason)
            peers.remove(peer)
    for env in args.envs.split(","):
        runs = []
        for round_ in range(1, args.rounds + 1):
            shift = (round_ - 1) % len(peers)
            for peer in peers[shift:] + peers[:shift]:
                result = one_run(peer, env, args)
                line = {"peer": peer, "env": env, "round": round_, **result, **machine(args)}
                emit("peer_run", **line)
                if "error" not in result:
                    runs.append(line)
        for peer in peers:
            mine = [r for r in runs if r["peer"] == peer]
            if mine:
                emit(
                    "peer_median",
                    peer=peer,
                    env=env,
                    runs=len(mine),
                    **{
                        key: statistics.median(r[key] for r in mine)
                        for key in (
                            "agent_steps_per_second",
                            "agent_steps_per_cpu_second",
                            "peak_rss",
                            "replay_allocated_bytes",
                            "replay_bytes_per_transition",
                        )
                        if all(key in r for r in mine)
                    },
                )
        pairs = [("qzoo", other) for other in peers if other != "qzoo"]
        pairs += [(mine, other) for mine in (*VARIANTS, "qzoo_before")
                  for other in peers if not other.startswith("qzoo")]  # fmt: skip
        for mine, other in pairs:
            found = mine in peers and ratios(runs, mine, other)
            if found:
                emit("peer_ratio", env=env, ratio=f"{mine}/{other}", **found)


def main(argv=None):
    parser = new_parser(__doc__)
    parser.add_argument("--envs", default="pong,cartpole")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads, every run")
    parser.add_argument("--cleanrl", default="", help="CleanRL checkout (or QZOO_CLEANRL)")
    parser.add_argument("--pong-warmup", type=int, default=5_000)
    parser.add_argument("--pong-steps", type=int, default=1_000)
    parser.add_argument("--cartpole-warmup", type=int, default=10_000)
    parser.add_argument("--cartpole-steps", type=int, default=10_000)
    # qzoo's MLP is 2 torso layers and the head's hidden layer, all this wide: 120 is
    # CleanRL's first width (29.5k multiply-adds per example against CleanRL's 10.7k
    # for 120 and 84); 72 gives CleanRL's arithmetic (10.8k).
    parser.add_argument(
        "--cartpole-mlp-hidden",
        type=int,
        default=120,
        help="qzoo's --mlp-hidden on CartPole (72: CleanRL's arithmetic)",
    )
    # A child run (internal).
    parser.add_argument("--qzoo-before", default="", help="also run qzoo from this source "
                        "tree (e.g. `git worktree add DIR COMMIT`), as qzoo_before")  # fmt: skip
    parser.add_argument("--child", choices=CHILDREN, help=argparse.SUPPRESS)
    parser.add_argument("--env", choices=tuple(ENVS), help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
