"""What every peer run of benchmarks/peers.py shares: the settings per environment,
the timing window, and the replay's memory figures (allocated, and resident as
/proc/self/pagemap tells)."""

import os
import time

import numpy as np

ENVS = {
    "pong": {"gym_id": "PongNoFrameskip-v4", "batch": 32, "every": 4, "capacity": 100_000,
             "lr": 1e-4, "target": 1_000, "epsilon": 0.01, "script": "dqn_atari.py"},
    "cartpole": {"gym_id": "CartPole-v1", "batch": 128, "every": 10, "capacity": 10_000,
                 "lr": 2.5e-4, "target": 500, "epsilon": 0.05, "script": "dqn.py"},
}  # fmt: skip


def memory(field):
    """A /proc/self/status field in bytes (VmRSS: resident now, VmHWM: peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def resident_bytes(arrays):
    """Bytes of `arrays` (NumPy, not overlapping) that are in RAM: pages never written are not (they are
    zero-filled on demand), which /proc/self/pagemap's present bit (63) tells."""
    page = os.sysconf("SC_PAGE_SIZE")
    pages = {}  # page number -> bytes of the arrays on it
    for a in arrays:
        if a is None or a.nbytes == 0:
            continue
        begin = a.__array_interface__["data"][0]
        end = begin + a.nbytes
        for number in range(begin // page, (end - 1) // page + 1):
            overlap = min(end, (number + 1) * page) - max(begin, number * page)
            pages[number] = pages.get(number, 0) + overlap
    resident = 0
    with open("/proc/self/pagemap", "rb") as f:
        numbers = sorted(pages)
        run_begin = 0
        while run_begin < len(numbers):  # read runs of consecutive pages at once
            run_end = run_begin
            while run_end + 1 < len(numbers) and numbers[run_end + 1] == numbers[run_end] + 1:
                run_end += 1
            f.seek(numbers[run_begin] * 8)
            entries = np.frombuffer(f.read(8 * (run_end - run_begin + 1)), np.uint64)
            present = (entries >> np.uint64(63)) & np.uint64(1)
            sizes = np.array([pages[n] for n in numbers[run_begin : run_end + 1]])
            resident += int((sizes * present).sum())
            run_begin = run_end + 1
    return resident


def replay_figures(arrays, stored):
    """The replay's allocated bytes, resident bytes and resident bytes per stored
    transition (`stored` transitions in it now)."""
    resident = resident_bytes(arrays)
    return {
        "replay_allocated_bytes": sum(a.nbytes for a in arrays if a is not None),
        "replay_resident_bytes": resident,
        "replay_bytes_per_transition": resident / stored,
    }


def buffer_arrays(rb):
    """The arrays of SB3's ReplayBuffer (CleanRL's is a copy of it)."""
    names = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    return [getattr(rb, name, None) for name in names]


class Window:
    """Times the agent steps between two environment step counts."""

    def __init__(self, begin, steps):
        self.begin, self.end = begin, begin + steps
        self.started = None
        self.result = {}

    def at(self, count):
        """Called with the number of environment steps taken so far."""
        if count == self.begin:
            self.started, self.cpu = time.perf_counter(), time.process_time()
        elif count == self.end:
            seconds, steps = time.perf_counter() - self.started, self.end - self.begin
            self.result = {
                "agent_steps_per_second": steps / seconds,
                "window_seconds": seconds,
                "agent_steps_per_cpu_second": steps / (time.process_time() - self.cpu),
            }
