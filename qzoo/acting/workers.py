"""Environments stepped in worker processes, behind the vector-environment contract
of qzoo/envs (rlpyt's CpuSampler/GpuSampler workers, B7).

`ProcessVectorEnv` splits N environments into K contiguous slices, one per worker
process; each worker owns an ordinary qzoo vector environment for its slice
(envs.make) and writes its steps into shared memory (numpy views on
multiprocessing.RawArray), so observations never travel through a pipe. The parent
chooses every action, batched, on the learner's device (rlpyt's "action server").
Commands are a few bytes on a pipe (no pickle). Environment i of the whole is seeded
seed + i, as in one vector environment, so the steps are the same as with
--acting serial (the slices' seeds are offset by their first index).

`step_async(actions, workers)` / `step_wait(workers)` let a caller overlap one group
of workers' environment steps with work of its own (the alternating actor).
"""

import itertools
import multiprocessing
import os
import signal

import numpy as np

from qzoo import envs
from qzoo.envs.step import EnvStep
from qzoo.signals import die_with_parent

_FLAGS = ("first", "last", "terminated", "life_loss")


def _shared(ctx, shape, dtype):
    dtype = np.dtype(dtype)
    raw = ctx.RawArray("b", max(1, int(np.prod(shape)) * dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype, count=int(np.prod(shape))).reshape(shape)


def _serve(config, lo, hi, eval_mode, shared, index, conn, parent):
    """A worker of process `parent`: steps environments lo..hi-1 on command; writes
    into `shared`."""
    die_with_parent(parent)  # a parent killed mid-command leaves no worker behind
    # The parent handles Ctrl-C and SIGTERM (as Ctrl-C), and closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    env = None
    try:
        env = envs.make(config, hi - lo, config.seed, eval_mode=eval_mode)
        conn.send_bytes(b"ok")
        while True:
            command = conn.recv_bytes()
            if command == b"close":
                break
            if command == b"reset":
                step = env.reset(seed=int(shared["seed"][0]) + lo)
            else:
                step = env.step(shared["actions"][lo:hi])
            shared["frame"][lo:hi] = step.frame
            shared["reward"][lo:hi] = step.reward
            for name in _FLAGS:
                shared[name][lo:hi] = getattr(step, name)
            shared["real_steps"][index] = step.real_steps
            conn.send_bytes(b"ok")
    except EOFError:  # the parent is gone
        pass
    except Exception as error:  # noqa: BLE001 (reported to the parent, which raises it)
        conn.send_bytes(f"error: {type(error).__name__}: {error}".encode())
    finally:
        if env is not None:
            env.close()


class ProcessVectorEnv:
    """`num_envs` environments in `workers` processes (module docstring)."""

    def __init__(self, config, num_envs, seed, eval_mode=False, *, info, workers):
        ctx = multiprocessing.get_context("fork")  # workers only step environments
        self.num_envs, self.num_workers = num_envs, workers
        bounds = np.linspace(0, num_envs, workers + 1).round().astype(int)
        self.slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._shared = {
            "frame": _shared(ctx, (num_envs, *info.frame_shape), info.frame_dtype),
            "reward": _shared(ctx, (num_envs,), np.float32),
            **{name: _shared(ctx, (num_envs,), bool) for name in _FLAGS},
            "real_steps": _shared(ctx, (workers,), np.int64),
            "actions": _shared(ctx, (num_envs,), np.int64),
            "seed": _shared(ctx, (1,), np.int64),
        }
        self._conns, self._processes = [], []
        for index, s in enumerate(self.slices):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_serve,
                args=(config, s.start, s.stop, eval_mode, self._shared, index, child, os.getpid()),
                daemon=True,
            )
            process.start()
            child.close()
            self._conns.append(parent)
            self._processes.append(process)
        self._wait(range(workers))

    def _wait(self, workers):
        for w in workers:
            reply = self._conns[w].recv_bytes()
            if reply != b"ok":
                self.close()
                raise RuntimeError(f"environment worker {w}: {reply.decode()[7:]}")

    def _send(self, command, workers):
        for w in workers:
            self._conns[w].send_bytes(command)

    def _read(self, workers):
        """The EnvStep of `workers`' environments (copies: the next step overwrites)."""
        lo, hi = self.slices[workers[0]].start, self.slices[workers[-1]].stop
        shared = self._shared
        return EnvStep(
            frame=shared["frame"][lo:hi].copy(), reward=shared["reward"][lo:hi].copy(),
            **{name: shared[name][lo:hi].copy() for name in _FLAGS},
            real_steps=int(shared["real_steps"][list(workers)].sum()),
        )  # fmt: skip

    def reset(self, seed):
        everyone = range(self.num_workers)
        self._shared["seed"][0] = int(seed)
        self._send(b"reset", everyone)
        self._wait(everyone)
        return self._read(everyone)

    def step_async(self, actions, workers):
        """Starts `workers` (consecutive indices) on `actions` for their environments."""
        lo, hi = self.slices[workers[0]].start, self.slices[workers[-1]].stop
        self._shared["actions"][lo:hi] = actions
        self._send(b"step", workers)

    def step_wait(self, workers):
        self._wait(workers)
        return self._read(workers)

    def step(self, actions):
        everyone = range(self.num_workers)
        self.step_async(actions, everyone)
        return self.step_wait(everyone)

    def close(self):
        for conn, process in zip(self._conns, self._processes):
            try:
                conn.send_bytes(b"close")
            except OSError:
                pass
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
            conn.close()
        self._conns, self._processes = [], []
