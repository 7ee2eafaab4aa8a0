"""How many of the suite's runs go at once, and with how many threads each: the
usable cores at the runs' thread count, the available memory at qzoo's estimate of a
run's peak."""

import os

from qzoo.errors import UserError

BIG = ("nature_cnn", "dopamine_cnn")  # torsos whose auto thread count is above 1 (run/threads.py)
MOST_THREADS = 4  # run/threads.py's largest auto count


def run_threads(config):
    """(PyTorch threads the run uses, whether the suite may choose them): --threads N,
    OMP_NUM_THREADS where set, 1 where auto picks 1 (small networks, a GPU, pinned or
    forking runs), else auto's count, which the suite sets."""
    from qzoo import envs
    from qzoo.configuration.validate import resolved_torso
    from qzoo.run import threads

    if config.threads:
        return config.threads, False
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"])), False
    if threads.one_thread(config) or _on_gpu(config):
        return 1, False
    if resolved_torso(config, envs.resolve(config.env)[0]) not in BIG:
        return 1, False
    return 1, True


def _on_gpu(config):
    if config.device == "cuda":
        return True
    if config.device != "auto":
        return False
    import torch

    return torch.cuda.is_available()


def peak_memory(config):
    """qzoo's estimate of the run's peak memory in bytes (run/checks.py), None
    where the run does not fit even alone (its own start then says so)."""
    from qzoo import envs
    from qzoo.run.checks import check_peak_memory

    try:
        return check_peak_memory(config, envs.describe(config))
    except UserError:
        return None


def choose_jobs(todo, jobs):
    """(runs at once, why): --jobs, else the least of the runs to do, the usable cores
    over each run's threads, and the available memory over the largest run's peak."""
    if jobs is not None:
        return jobs, "--jobs"
    if not todo:
        return 1, "nothing to run"
    from qzoo import envs
    from qzoo.run import threads
    from qzoo.run.checks import _available_memory

    cores = threads.usable_cores()
    per_run = max(run_threads(r.config)[0] for r in todo)
    by_cores = max(1, cores // per_run)
    why = f"{cores} usable cores, {per_run} thread{'s' if per_run > 1 else ''} a run"
    by_memory, available = None, _available_memory()
    if available is not None:
        peaks = {}
        for run in todo:  # one estimate per replay: an agent's, in one domain, one size
            key = (run.agent, envs.resolve(run.config.env)[0], run.config.replay_capacity,
                   run.config.num_envs)  # fmt: skip
            if key not in peaks:
                peaks[key] = peak_memory(run.config)
        if None in peaks.values():
            by_memory = 1
        else:
            by_memory = max(1, available // max(peaks.values()))
        why += f"; memory for {by_memory}"
    jobs = max(1, min(len(todo), by_cores, by_memory or by_cores))
    return jobs, why


def share_threads(todo, jobs):
    """Sets each run's thread count; where auto's would exceed 1, the usable cores
    shared out between the runs at once (OMP_NUM_THREADS, which --threads auto follows)."""
    from qzoo.run import threads

    cores = threads.usable_cores()
    for run in todo:
        count, choose = run_threads(run.config)
        if choose:
            count = max(1, min(MOST_THREADS, cores // jobs))
            run.env = {"OMP_NUM_THREADS": str(count)}
        run.threads = count
