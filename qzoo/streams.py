"""Random streams: one root seed spawns an independent stream for each part of a run.

DQN Zoo splits one JAX key per consumer; NumPy's SeedSequence does the same for
NumPy and PyTorch generators. Each part (the training actor, evaluation, replay
sampling, the learner) draws only from its own stream, so how long one part runs
never changes what another draws: an evaluation of 500 frames and one of 2,000
leave training identical. Every stream's state is in the checkpoint, so a resumed
run draws exactly what an uninterrupted one would, and a stream can be handed to
a part that runs in another thread or process.
"""

import numpy as np
import torch

PARTS = ("actor", "evaluation", "replay", "learner")


class Stream:
    """A NumPy Generator (host-side draws: env seeds, replay indices) and a torch
    Generator on `device` (device-side draws: exploration, noisy-net noise, IQN's
    taus), both seeded from one SeedSequence child."""

    def __init__(self, seed_sequence, device):
        self.numpy = np.random.Generator(np.random.PCG64(seed_sequence))
        self.torch = torch.Generator(device=device)
        self.torch.manual_seed(int(seed_sequence.generate_state(1, np.uint64)[0]) >> 1)

    @classmethod
    def restored(cls, state, device):
        """A stream in `state` (a `state_dict`) on `device`: one handed to another
        process."""
        stream = cls.__new__(cls)
        stream.numpy = np.random.Generator(np.random.PCG64())
        stream.torch = torch.Generator(device=device)
        stream.load_state_dict(state)
        return stream

    def state_dict(self):
        return {"numpy": self.numpy.bit_generator.state, "torch": self.torch.get_state()}

    def load_state_dict(self, state):
        self.numpy.bit_generator.state = state["numpy"]
        self.torch.set_state(state["torch"].to(torch.uint8).cpu())


class Streams:
    """One `Stream` per part of a run, spawned from `seed`. Each part's torch
    generator lives where that part draws: `device` by default (the policy's and the
    learner's device in one process), `devices` per part otherwise; replay sampling
    draws on the host."""

    def __init__(self, seed, device="cpu", devices=None):
        devices = {"replay": "cpu", **(devices or {})}
        children = np.random.SeedSequence(seed).spawn(len(PARTS))
        self.parts = {
            name: Stream(child, devices.get(name, device)) for name, child in zip(PARTS, children)
        }

    def __getattr__(self, name):
        try:
            return self.__dict__["parts"][name]
        except KeyError:
            raise AttributeError(name) from None

    def state_dict(self):
        return {name: stream.state_dict() for name, stream in self.parts.items()}

    def load_state_dict(self, state):
        for name, stream in self.parts.items():
            stream.load_state_dict(state[name])
