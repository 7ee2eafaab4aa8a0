"""qzoo's PQN next to CleanRL's pqn.py on CartPole-v1, same settings, in one run.

    python benchmarks/pqn_cleanrl.py --cleanrl DIR [--python PY] [--steps 500000] [--seed 1]

DIR holds CleanRL's cleanrl/pqn.py (a checkout; never downloaded); PY is a Python with
its requirements (tyro; e.g. a venv with --system-site-packages). Both run CleanRL's
defaults (4 environments x 128 steps, 4 epochs of 4 minibatches, lambda 0.65, RAdam
2.5e-4 annealed per rollout, epsilon 1 -> 0.05 over half the steps, the 120-84 MLP with
LayerNorm) on one thread each (OMP_NUM_THREADS=1, qzoo --threads 1), CleanRL first.

CleanRL's script reads `infos["final_info"]`, which Gymnasium 1.x never writes (its
next-step autoreset puts the statistics in `infos["episode"]`): a copy of the script is
run with that logging line changed, and nothing else. Prints a JSON line per program
(agent steps per second over training, the mean training episode return over the last
10% of the steps) and qzoo's ratios to CleanRL.
"""

import csv
import os
import re
import subprocess
import sys
import tempfile

from harness import emit, new_parser

FINAL_INFO = """            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
"""
EPISODE = """            if "episode" in infos:
                for r in infos["episode"]["r"][infos["_episode"]]:
                    print(f"global_step={global_step}, episodic_return={r}")
"""
THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def cleanrl(folder, python, steps, seed, work):
    with open(os.path.join(folder, "cleanrl", "pqn.py")) as f:
        source = f.read()
    if FINAL_INFO not in source:
        raise SystemExit("cleanrl/pqn.py: its final_info logging block was not found")
    block_end = source.index(FINAL_INFO) + len(FINAL_INFO)
    rest = source[block_end:].split("\n", 2)  # the two writer.add_scalar lines after it
    source = source[: source.index(FINAL_INFO)] + EPISODE + rest[2]
    script = os.path.join(work, "pqn.py")
    with open(script, "w") as f:
        f.write(source)
    done = subprocess.run([python, script, "--no-cuda", "--seed", str(seed),
                           "--total-timesteps", str(steps)], cwd=work,
                          env={**os.environ, **THREAD}, capture_output=True, text=True,
                          check=True)  # fmt: skip
    episodes = [(int(s), float(r)) for s, r in
                re.findall(r"global_step=(\d+), episodic_return=([-\d.e]+)", done.stdout)]  # fmt: skip
    sps = int(re.findall(r"SPS: (\d+)", done.stdout)[-1])
    last = [r for s, r in episodes if s > 0.9 * steps]
    return {"program": "cleanrl_pqn", "steps_per_second": sps, "episodes": len(episodes),
            "last_10pct_mean_return": sum(last) / len(last)}  # fmt: skip


def qzoo(steps, seed, work):
    folder = os.path.join(work, "qzoo")
    subprocess.run([sys.executable, "-m", "qzoo", "train", "pqn", "--env", "CartPole-v1",
                    "--seed", str(seed), "--iterations", "10", "--train-frames",
                    str(steps // 10), "--eval-frames", "4", "--threads", "1",
                    "--run-dir", folder, "--no-tensorboard", "--progress", "false"],
                   env={**os.environ, **THREAD}, capture_output=True, check=True)  # fmt: skip
    with open(os.path.join(folder, "results.csv")) as f:
        rows = list(csv.DictReader(f))[1:]
    # Training time only (evaluation is 4 frames): each iteration's frames / its rate.
    seconds = sum((steps // 10) / float(r["train_steps_per_second"]) for r in rows)
    return {"program": "qzoo_pqn", "steps_per_second": steps / seconds,
            "last_10pct_mean_return": float(rows[-1]["train_episode_return"])}  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--cleanrl", default=os.environ.get("QZOO_CLEANRL", ""))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--steps", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qzoo-pqn-cleanrl-") as work:
        theirs = cleanrl(args.cleanrl, args.python, args.steps, args.seed, work)
        emit(theirs)
        ours = qzoo(args.steps, args.seed, work)
        emit(ours)
    emit(
        {
            "name": "qzoo_pqn_vs_cleanrl",
            "env": "CartPole-v1",
            "steps_per_second_ratio": ours["steps_per_second"] / theirs["steps_per_second"],
            "return_ratio": ours["last_10pct_mean_return"] / theirs["last_10pct_mean_return"],
        }
    )


if __name__ == "__main__":
    main()
