"""What a Ray replay shard process costs to start (Ray scale-out, qzoo/distributed/): the
CPU time and memory of importing what each kind of Ray process needs, in a fresh
interpreter, and with --ray the time until a real shard actor answers in a local Ray
instance and its process's resident memory. One JSON line per kind and measure.

    python benchmarks/shard_start.py --rounds 5 --ray
"""

import statistics
import subprocess
import sys
import time

from harness import emit, new_parser

KINDS = {  # the module Ray imports to build each kind of process's class
    "replay_shard": "qzoo.distributed.shards",
    "dataset_shard": "qzoo.distributed.dataset_shards",
    "actor_worker": "qzoo.distributed.workers",
}

CHILD = """
import resource, sys, time
t = time.perf_counter()
import {module}
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(wall, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, "torch" in sys.modules)
"""


def import_cost(module, rounds):
    """Median wall s, CPU s (whole interpreter) and peak RSS MiB of a fresh interpreter
    importing `module`, and whether it imported torch."""
    runs = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", CHILD.format(module=module)],
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        runs.append((float(out[0]), float(out[1]), float(out[2]), out[3] == "True"))
    return [statistics.median(r[i] for r in runs) for i in range(3)] + [runs[0][3]]


def resident_mib(pid):
    """A process's resident memory (Linux /proc), MiB."""
    with open(f"/proc/{pid}/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kib / 1024


def ray_start(rounds):
    """Seconds until a ReplayShard and a DatasetShard actor answer, and their RSS."""
    import ray

    from qzoo.configuration import build_config
    from qzoo.distributed.dataset_shards import DatasetShard
    from qzoo.distributed.shards import ReplayShard
    from qzoo.envs import describe

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = build_config("dqn", {"env": "CartPole-v1", "ray": "true", "actors": "1"})
    info = describe(config)
    try:
        for name, cls, args in [("replay_shard", ReplayShard, (config, info, 0)),
                                ("dataset_shard", DatasetShard, (config, info, 0))]:  # fmt: skip
            seconds, rss = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                actor = ray.remote(num_cpus=0)(cls).remote(*args)
                pid = ray.get(actor.__ray_call__.remote(lambda self: __import__("os").getpid()))
                seconds.append(time.perf_counter() - t)
                rss.append(resident_mib(pid))
                ray.kill(actor)
            yield name, statistics.median(seconds), statistics.median(rss)
    finally:
        ray.shutdown()


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ray", action="store_true", help="also start real shard actors")
    args = parser.parse_args()
    for kind, module in KINDS.items():
        wall, cpu, rss, torch = import_cost(module, args.rounds)
        emit({"name": "shard_start", "kind": kind, "measure": "import", "module": module,
              "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_mib": round(rss, 1),
              "imports_torch": torch})  # fmt: skip
    if args.ray:
        for kind, seconds, rss in ray_start(args.rounds):
            emit({"name": "shard_start", "kind": kind, "measure": "ray_actor",
                  "ready_s": round(seconds, 3), "rss_mib": round(rss, 1)})  # fmt: skip


if __name__ == "__main__":
    main()
