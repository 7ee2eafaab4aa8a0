"""Acting beside a learner on the device (`--acting async` with `--device cuda`, and
`--capture` under every driver that samples through the trainer).

On a GPU the async actor acts on a CUDA stream of its own, rows reach a device replay
on the learner's stream and weights are staged behind events (acting/asynchronous.py),
so neither waits for the other's queued work. The CPU tests check the same drivers
with the captured update on CPU tensors; the GPU ones run where there is a GPU (the
prepared GPU script, benchmarks/gpu_check.py, runs them there).
"""

import gymnasium
import numpy as np
import pytest
import torch
from test_acting import cartpole

from qzoo.run.trainer import Trainer

CAPTURED = {"replay_device": "cpu", "capture": True, "mlp_hidden": 16}


@pytest.mark.parametrize("acting", ["serial", "async"])
def test_captured_updates_under_serial_and_async_acting(acting):
    """The captured update samples and learns under the async driver's lock too: the
    replay ratio is held (updates counted) and every stored transition stays valid."""
    config = cartpole(acting=acting, train_frames=1200, threads=1, **CAPTURED)
    trainer = Trainer(config)
    rows = [trainer.run_iteration() for _ in range(2)]
    expected = trainer.updates.schedule.updates_per_frame * (1200 - config.min_replay_size)
    assert rows[1]["train_num_updates"] >= 0.9 * expected, rows[1]
    assert trainer.replay.storage.device.type == "cpu"
    assert_cartpole_transitions(trainer.replay)


def assert_cartpole_transitions(replay, n=256):
    """Each sampled (s_tm1, a_tm1, s_t) of a device replay is one step of CartPole."""
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    batch = replay.sample(n)
    arrays = [torch.as_tensor(x).cpu().double().numpy() for x in (batch.s_tm1, batch.a_tm1,
                                                                   batch.s_t)]  # fmt: skip
    for s_tm1, a_tm1, s_t in zip(*arrays, strict=True):
        env.state, env.steps_beyond_terminated = s_tm1, None
        np.testing.assert_allclose(s_t, env.step(int(a_tm1))[0], rtol=1e-5, atol=1e-5)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
@pytest.mark.parametrize("options", [
    {}, {"replay_device": "cuda"}, {"replay_device": "cuda", "capture": True},
    {"replay_device": "cuda", "compile": True},
])  # fmt: skip
def test_gpu_async_actor_on_its_own_stream_trains(options):
    """An async run on the GPU: the actor's stream is not the learner's, the phase
    holds the ratio, losses are finite, and every stored transition is valid."""
    config = cartpole(acting="async", train_frames=1600, device="cuda", threads=1,
                      publish_period=4, **options)  # fmt: skip
    trainer = Trainer(config)
    assert trainer.driver._actor_stream != torch.cuda.default_stream()
    rows = [trainer.run_iteration() for _ in range(2)]
    assert rows[1]["train_num_updates"] > 0 and torch.isfinite(torch.tensor(rows[1]["train_loss"]))
    gate = trainer.driver.gate
    assert (
        int(gate.target()) <= gate.consumed <= gate.target() * (1 + config.replay_ratio_tolerance)
    )
    assert_cartpole_transitions(trainer.replay)


@needs_cuda
def test_gpu_actor_takes_the_staged_weights_after_the_learners_step():
    """The staged copy is ordered after the learner's queued step and read back on the
    actor's stream: the actor's network equals the learner's after a publish."""
    config = cartpole(acting="async", device="cuda", threads=1, publish_period=1,
                      replay_device="cuda", capture=True)  # fmt: skip
    trainer = Trainer(config)
    trainer.train_phase(config.min_replay_size * config.action_repeats + 200)
    policy = trainer.driver.actor_policy
    trainer.driver.publish()
    with torch.cuda.stream(trainer.driver._actor_stream):
        policy(torch.zeros((1, *trainer.obs_shape)).numpy(), [0.0], torch.Generator("cuda"))
        torch.cuda.current_stream().synchronize()
    for a, b in zip(trainer.learner.online.state_dict().values(),
                    policy.network.state_dict().values()):  # fmt: skip
        assert torch.equal(a, b)


@needs_cuda
@pytest.mark.parametrize("options", [
    {}, {"replay_device": "cuda", "capture": True},
])  # fmt: skip
def test_gpu_actor_process_from_the_forkserver_trains(options):
    """--actor-process beside a GPU learner: the actor comes from the forkserver with
    its network on the GPU in a CUDA context of its own; every row arrives, the ratio
    holds, and the weights it takes are the learner's, copied to the host from device
    snapshots (acting/process_channels.py)."""
    config = cartpole(acting="async", actor_process=True, train_frames=1600, device="cuda",
                      threads=1, **options)  # fmt: skip
    trainer = Trainer(config)
    assert trainer.driver._ctx.get_start_method() == "forkserver"
    rows = [trainer.run_iteration() for _ in range(3)]
    assert trainer.updates.transitions_collected == trainer.frame_t // config.action_repeats
    assert rows[2]["train_num_updates"] > 0 and torch.isfinite(torch.tensor(rows[2]["train_loss"]))
    gate = trainer.driver.gate
    assert int(gate.target()) - 2 <= gate.consumed <= gate.target() * 1.05 + 2
    weights = trainer.driver.weights
    assert weights.taken.value >= 2 and weights.sequence.value % 2 == 0
    trainer.driver.publish(wait=True)
    for k, v in weights.tensors.items():
        assert torch.equal(v, trainer.learner.online.state_dict()[k].cpu())
    assert_cartpole_transitions(trainer.replay)


@needs_cuda
def test_gpu_actor_weights_reach_the_host_only_after_the_learners_queued_work():
    """A GPU learner's published weights are those after its queued updates: the
    snapshot is ordered after them on its stream, and copied to the host only once the
    snapshot is done (waited for at a phase start, polled between publishes)."""
    import multiprocessing
    import time

    from qzoo import envs
    from qzoo.acting.process_channels import SharedWeights
    from qzoo.networks.network import make_network

    config = cartpole()
    online = make_network(config, envs.describe(config), (4,)).cuda()
    weights = SharedWeights(multiprocessing.get_context("fork"), online)

    def queued_update():
        torch.cuda._sleep(2**30)  # GPU time queued before the update (about a second)
        with torch.no_grad():
            for p in online.parameters():
                p.add_(1.0)

    def host_copy_is_the_learners():
        expected = {k: v.cpu() for k, v in online.state_dict().items()}
        return all(torch.equal(v, expected[k]) for k, v in weights.tensors.items())

    queued_update()
    weights.write(wait=True)
    assert host_copy_is_the_learners()
    weights.taken.value = sequence = weights.sequence.value  # the actor took them
    queued_update()
    weights.write()  # a snapshot behind the queued update: nothing copied yet
    weights.advance()
    assert weights.sequence.value == sequence
    deadline = time.monotonic() + 600
    while weights.sequence.value == sequence:
        assert time.monotonic() < deadline
        time.sleep(0.01)
        weights.advance()
    assert weights.sequence.value == sequence + 2 and host_copy_is_the_learners()
