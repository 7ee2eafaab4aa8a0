"""The faster paths of issue 13 (peers on the CPU) compute what the plain ones do."""

import importlib.util
import mmap
import os

import numpy as np
import torch
from helpers import REPO

from qzoo.learning.optim import CenteredRMSProp
from qzoo.networks.torsos import NatureTorso, training_layout


def test_foreach_centered_rmsprop_equals_the_per_parameter_update_bit_for_bit():
    # The per-parameter loop qzoo ran before (one operation per tensor), as reference.
    torch.manual_seed(0)
    shapes = [(32, 4, 8, 8), (32,), (512, 3136 // 49), (6,)]
    for initial_nu in (0.0, 1.0):
        params = [torch.randn(s) for s in shapes]
        reference = [p.clone() for p in params]
        frozen = torch.randn(3)  # no gradient: left alone by both
        optimizer = CenteredRMSProp(params + [frozen], lr=2.5e-4, decay=0.95, eps=1e-5,
                                    initial_nu=initial_nu)  # fmt: skip
        nu = [torch.full_like(p, initial_nu) for p in reference]
        mu = [torch.zeros_like(p) for p in reference]
        for _ in range(5):
            for p, r in zip(params, reference):
                g = torch.randn_like(p) * 10.0 ** float(torch.randint(-6, 2, ()))
                p.grad, r.grad = g.clone(), g.clone()
            optimizer.step()
            for r, n, m in zip(reference, nu, mu):
                g = r.grad
                n.mul_(0.95).addcmul_(g, g, value=1 - 0.95)
                m.mul_(0.95).add_(g, alpha=1 - 0.95)
                r.data.addcdiv_(g, (n - m.square()).add_(1e-5).sqrt_(), value=-2.5e-4)
        assert all(torch.equal(p, r) for p, r in zip(params, reference))
        assert frozen.grad is None and "nu" not in optimizer.state[frozen]


def test_channels_last_only_for_differentiated_cpu_passes():
    x = torch.rand(2, 4, 84, 84)
    with torch.no_grad():
        assert training_layout(x) is x  # acting and targets keep the default layout
    y = training_layout(x)
    assert y.is_contiguous(memory_format=torch.channels_last) and torch.equal(y, x)


def test_nature_torso_in_either_layout_gives_the_same_outputs_and_gradients():
    torch.manual_seed(0)
    torso = NatureTorso(4)
    x = torch.rand(3, 4, 84, 84)
    out = torso(x)  # channels-last (gradients enabled, CPU)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in torso.parameters()]
    torso.zero_grad()
    plain = torso.net(x)  # the default layout
    plain.square().sum().backward()
    torch.testing.assert_close(out, plain, rtol=1e-5, atol=1e-6)
    for g, p in zip(grads, torso.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-5)


def _peers():
    path = REPO / "benchmarks" / "peers.py"
    spec = importlib.util.spec_from_file_location("peers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resident_bytes_counts_only_the_pages_written():
    page = os.sysconf("SC_PAGE_SIZE")
    # A fresh anonymous mapping, zero-filled on demand (as the replays' large arrays are;
    # a small np.zeros may reuse heap pages already resident).
    memory = mmap.mmap(-1, 256 * page)
    a = np.frombuffer(memory, np.uint8)
    peers = _peers()
    assert peers.resident_bytes([a]) == 0
    a[: 16 * page] = 1
    a[100 * page + 5] = 1
    assert peers.resident_bytes([a]) == 17 * page
    # Bytes of the arrays on resident pages, two arrays sharing a page counted once each.
    assert peers.resident_bytes([a[: 8 * page + 100], a[8 * page + 100 : 12 * page]]) == 12 * page
    assert peers.resident_bytes([a[16 * page - 10 : 40 * page]]) == 10
    del a
    memory.close()


def test_cleanrl_gets_gymnasium_029s_infos_where_an_episode_ends():
    import gymnasium as gym

    _peers()  # puts benchmarks/ on the path
    from peer_baselines import gymnasium_029_infos

    def make():
        return gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))

    envs = gym.vector.SyncVectorEnv([make, make], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(500):
        obs, _, terminated, truncated, infos = gymnasium_029_infos(
            *envs.step(envs.action_space.sample())
        )
        if "final_info" in infos:
            break
    done = terminated | truncated
    assert done.any() and not done.all()  # one episode ended, the other goes on
    for i, d in enumerate(done):
        if d:  # the last observation, and the episode's statistics, for CleanRL's loop
            assert np.array_equal(infos["final_observation"][i], infos["final_obs"][i])
            episode = infos["final_info"][i]["episode"]
            assert episode["l"] > 0 and episode["r"] == episode["l"]  # CartPole: 1 a step
            assert not np.array_equal(obs[i], infos["final_observation"][i])  # reset already
        else:
            assert infos["final_observation"][i] is None and infos["final_info"][i] is None
    envs.close()


def test_ratios_are_medians_over_rounds_of_paired_runs():
    runs = []
    for round_, (mine, theirs) in enumerate([(100, 50), (90, 60), (30, 10)], 1):
        for peer, rate in (("qzoo", mine), ("cleanrl", theirs)):
            runs.append({"round": round_, "peer": peer, "agent_steps_per_second": rate,
                         "peak_rss": 1.0, "replay_bytes_per_transition": 1.0})  # fmt: skip
    runs.append({"round": 4, "peer": "qzoo", "agent_steps_per_second": 1.0, "peak_rss": 1.0,
                 "replay_bytes_per_transition": 1.0})  # unpaired: left out  # fmt: skip
    found = _peers().ratios(runs, "qzoo", "cleanrl")
    assert found["agent_steps_per_second"] == 2.0  # median of 2, 1.5 and 3
    assert found["rounds"] == 3


def test_freed_batch_memory_is_reused_without_page_faults():
    """allocator.keep_freed_memory: a replay batch's ~1 MB arrays, allocated and freed
    again and again, stop costing a page fault per 4 KB (counted in a fresh process)."""
    import subprocess
    import sys

    code = """
import resource, sys
import numpy as np
from qzoo.run import allocator
if sys.argv[1] == "keep":
    assert allocator.keep_freed_memory() and allocator.keep_freed_memory()
def batch():  # s_tm1 and s_t of 32 stacked Atari states, 0.9 MB each, then freed
    s_tm1, s_t = np.ones((32, 4, 84, 84), np.uint8), np.ones((32, 4, 84, 84), np.uint8)
    return int(s_tm1[0, 0, 0, 0]) + int(s_t[0, 0, 0, 0])
for _ in range(10):
    batch()  # warm-up
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    batch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

    def faults_in(mode):
        command = [sys.executable, "-c", code, mode]
        return int(subprocess.run(command, capture_output=True, text=True, check=True).stdout)

    faults = {mode: faults_in(mode) for mode in ("default", "keep")}
    assert faults["default"] > 200 * 100, faults  # ~221 pages an array, faulted in again
    assert faults["keep"] < 200, faults  # reused: at most a few in all
