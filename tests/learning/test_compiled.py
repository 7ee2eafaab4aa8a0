"""`--compile` (qzoo/compiled.py, qzoo/draws.py): the compiled gradient step computes
the eager step's gradients, loss, mean Q and priorities to float tolerance, draws the
same random numbers from the learner's stream, and takes each optimizer's step (a
compiled run's exact resume: tests/test_run.py's state round trip).

Compiling costs seconds per agent on a CPU (less with PyTorch's kernel cache warm), so
the agents here are the ones that cover each path: plain Q-learning, importance weights
and priorities, noise (Rainbow: noisy dueling C51 on double n-step), taus (IQN),
quantile regression, and REM's mixtures.
"""

import copy
import statistics
import subprocess
import sys

import pytest
import torch
from helpers import SMALL_HEADS

from qzoo import envs
from qzoo.configuration import build_config
from qzoo.learning.precision import autocast
from qzoo.networks import draws
from qzoo.networks.network import _input_dtype, make_network
from qzoo.run.trainer import Trainer

SMALL = {
    "env": "CartPole-v1",
    "iterations": "3",
    "train_frames": "400",
    "eval_frames": "100",
    "replay_capacity": "1000",
    "min_replay_capacity_fraction": "0.1",
    **SMALL_HEADS,
}


def _trainers(agent, extra):
    """An eager and a compiled trainer in the same state, replay filled."""
    eager = Trainer(build_config(agent, {**SMALL, **extra}))
    eager.train_phase(int(SMALL["replay_capacity"]) // 2)
    compiled = Trainer(build_config(agent, {**SMALL, **extra, "compile": "true"}))
    # A copy: loading a live state dict would share the optimizers' moment tensors.
    compiled.load_state_dict(copy.deepcopy(eager.state_dict()))
    return eager, compiled


@pytest.mark.parametrize("agent, extra", [
    ("dqn", {}), ("prioritized", {}), ("rainbow", {}), ("iqn", {}), ("qrdqn", {}),
    ("rem", {"num_heads": "3"}),
])  # fmt: skip
def test_compiled_step_equals_the_eager_step(agent, extra):
    eager, compiled = _trainers(agent, extra)
    for learner in (eager.learner, compiled.learner):
        learner.pop_statistics()
    for _ in range(3):  # the first compiled update traces; later ones replay the graph
        batch = eager.replay.sample(eager.config.batch_size)
        p_eager = eager.learner.learn(batch)
        p_compiled = compiled.learner.learn(batch)
        # The same random numbers were drawn: the streams are in the same state.
        assert torch.equal(eager.learner.generator.get_state(),
                           compiled.learner.generator.get_state())  # fmt: skip
        for a, b in zip(eager.learner.online.parameters(), compiled.learner.online.parameters()):
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6)
            # One Adam step moves a weight by about lr at most: a gradient that
            # differs in its last bits moves it the same way.
            torch.testing.assert_close(b, a, rtol=0, atol=2 * eager.config.learning_rate)
        if p_eager is not None:
            torch.testing.assert_close(torch.as_tensor(p_compiled), torch.as_tensor(p_eager),
                                       rtol=1e-4, atol=1e-6)  # fmt: skip
    s_eager, s_compiled = eager.learner.pop_statistics(), compiled.learner.pop_statistics()
    assert s_compiled["num_updates"] == s_eager["num_updates"] == 3
    assert s_compiled["loss"] == pytest.approx(s_eager["loss"], rel=1e-4)
    assert s_compiled["mean_q"] == pytest.approx(s_eager["mean_q"], rel=1e-4, abs=1e-6)


def test_tape_replays_the_generator_draws():
    generator = torch.Generator().manual_seed(7)
    state = generator.get_state()
    recorder = draws.Recorder(generator)
    u = draws.uniform((3, 2), recorder, "cpu")
    noise = draws.factorised_noise((5,), recorder, "cpu")
    assert recorder.draws == [("uniform", (3, 2)), ("noise", (5,))]
    generator.set_state(state)
    tape = draws.Tape(draws.draw(recorder.draws, generator, "cpu"))
    assert torch.equal(draws.uniform((3, 2), tape, "cpu"), u)
    assert torch.equal(draws.factorised_noise((5,), tape, "cpu"), noise)
    # Drawn straight from the generator, the same numbers again.
    generator.set_state(state)
    assert torch.equal(draws.uniform((3, 2), generator, "cpu"), u)
    assert torch.equal(draws.factorised_noise((5,), generator, "cpu"), noise)


def test_factorised_noise_is_f_of_a_truncated_normal_quantile():
    """f(x) = sign(x) sqrt(|x|) with x the standard normal's quantile of u mapped into
    [Phi(-2), Phi(2)], worked out with the standard library's NormalDist."""
    generator = torch.Generator().manual_seed(3)
    state = generator.get_state()
    noise = draws.factorised_noise((6,), generator, "cpu")
    generator.set_state(state)
    u = torch.rand(6, generator=generator).double().tolist()
    normal = statistics.NormalDist()
    low = normal.cdf(-2)
    for value, ui in zip(noise.tolist(), u):
        x = normal.inv_cdf(low + ui * (1 - 2 * low))
        assert value == pytest.approx((1 if x >= 0 else -1) * abs(x) ** 0.5, abs=2e-3)
        assert abs(value) <= 2**0.5 + 1e-6


def test_compile_refused_for_r2d1_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "qzoo", "train", "r2d1", "--env", "CartPole-v1", "--compile"],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--compile" in line and "LSTM" in line


@pytest.mark.parametrize("agent", ["dqn", "c51"])
def test_bfloat16_step_is_close_to_float32(agent):
    """--precision bfloat16: the same update in bfloat16 autocast; outputs stay float32,
    the loss within 1% and the gradients pointing the same way (cosine > 0.99) as the
    float32 step's from the same state, with and without --compile."""
    base = Trainer(build_config(agent, SMALL))
    base.train_phase(int(SMALL["replay_capacity"]) // 2)
    batch = base.replay.sample(base.config.batch_size)
    results = {}
    for precision, compile_ in (("float32", "false"), ("bfloat16", "false"), ("bfloat16", "true")):
        options = {**SMALL, "precision": precision, "compile": compile_}
        trainer = Trainer(build_config(agent, options))
        trainer.load_state_dict(copy.deepcopy(base.state_dict()))
        trainer.learner.pop_statistics()
        with autocast(precision, "cpu"):
            out = trainer.learner.online(torch.as_tensor(batch.s_tm1))
        assert out.q_values.dtype == torch.float32
        trainer.learner.learn(batch)
        grads = torch.cat([p.grad.flatten() for p in trainer.learner.online.parameters()])
        results[precision, compile_] = trainer.learner.pop_statistics()["loss"], grads
    loss, grads = results["float32", "false"]
    for key in (("bfloat16", "false"), ("bfloat16", "true")):
        assert results[key][0] == pytest.approx(loss, rel=1e-2)
        assert torch.nn.functional.cosine_similarity(results[key][1], grads, dim=0) > 0.99
    # bfloat16 really computed in bfloat16: not the float32 gradients bit for bit.
    assert not torch.equal(results["bfloat16", "false"][1], grads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("agent", ["dqn", "prioritized", "c51", "qrdqn", "rainbow", "iqn"])
def test_cuda_steps_equal_the_cpu_step(agent):
    """On a GPU: the eager CUDA update equals the CPU one to float tolerance (gradients,
    priorities; agents that draw random numbers are left out there, since a CUDA
    generator's stream is another), and the compiled CUDA update (CUDA graphs) equals
    the eager CUDA one, random draws included."""
    cpu = Trainer(build_config(agent, SMALL))
    cpu.train_phase(int(SMALL["replay_capacity"]) // 2)
    batch = cpu.replay.sample(cpu.config.batch_size)
    learners = {}
    for name, compile_ in (("eager", "false"), ("compiled", "true")):
        trainer = Trainer(build_config(agent, {**SMALL, "device": "cuda", "compile": compile_}))
        trainer.learner.load_state_dict(copy.deepcopy(cpu.learner.state_dict()))
        trainer.learner.generator.manual_seed(5)
        learners[name] = trainer.learner
    draws_random = agent in ("rainbow", "iqn")
    for step in range(3):
        p_cpu = cpu.learner.learn(batch)
        p_eager = learners["eager"].learn(batch)
        p_compiled = learners["compiled"].learn(batch)
        pairs = [(learners["eager"], learners["compiled"], p_eager, p_compiled)]
        if step == 0 and not draws_random:  # later the optimizers' rounding has diverged
            pairs.append((cpu.learner, learners["eager"], p_cpu, p_eager))
        for a, b, pa, pb in pairs:
            for x, y in zip(a.online.parameters(), b.online.parameters()):
                torch.testing.assert_close(y.grad.cpu(), x.grad.cpu(), rtol=1e-3, atol=1e-5)
            if pa is not None:
                torch.testing.assert_close(torch.as_tensor(pb).cpu(), torch.as_tensor(pa).cpu(),
                                           rtol=1e-3, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("kind", ["adam", "adam_tf1", "rmsprop_centered", "rmsprop_centered_tf1"])
def test_graph_update_equals_the_optimizer_step(kind):
    """optim.graph_update (the compiled step's optimizer, tensor operations only) does
    each optimizer's step with global-norm clipping: the same parameters and state (in
    the same format, so one checkpoint) as clip + `optimizer.step()`, over 5 steps."""
    from qzoo.learning import optim
    from qzoo.learning.from_config import make_optimizer

    config = build_config("dqn", {"env": "CartPole-v1", "optimizer": kind})
    torch.manual_seed(0)
    shapes = [(16, 4), (16,), (2, 16)]
    eager = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    graph = [torch.nn.Parameter(p.detach().clone()) for p in eager]
    opt_eager, opt_graph = make_optimizer(config, eager), make_optimizer(config, graph)
    update_ = optim.graph_update(opt_graph, max_global_grad_norm=1.0)
    for _ in range(5):
        grads = [torch.randn(s) for s in shapes]
        for p, g in zip(eager, grads):
            p.grad = g.clone()
        optim.clip_by_global_norm_(eager, 1.0)
        opt_eager.step()
        with torch.no_grad():
            update_([p.detach() for p in graph], [g.clone() for g in grads],
                    optim.graph_state(opt_graph))  # fmt: skip
        for a, b in zip(eager, graph):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for p_eager, p_graph in zip(eager, graph):
        state_eager, state_graph = opt_eager.state[p_eager], opt_graph.state[p_graph]
        assert state_eager.keys() == state_graph.keys()
        for key in state_eager:
            assert state_graph[key].dtype == state_eager[key].dtype
            torch.testing.assert_close(state_graph[key], state_eager[key], rtol=1e-5, atol=1e-7)


def test_more_learners_in_one_process_than_dynamos_recompile_limit():
    """Each compiled learner has its own Dynamo cache (compiled._own_code): a learner of
    another shape in a process that already compiled `recompile_limit` (8; 2 here, to
    keep the test short) of them (a suite, a sweep) compiles as the first did, where
    one shared code object would hit the limit and fail."""
    import torch._dynamo

    with torch._dynamo.config.patch(recompile_limit=2):
        for width in (16, 8, 9):  # 16: the size the tests above compile (kernel cache)
            options = {**SMALL, "compile": "true", "mlp_hidden": str(width)}
            trainer = Trainer(build_config("dqn", options))
            trainer.train_phase(200)
            batch = trainer.replay.sample(trainer.config.batch_size)
            trainer.learner.learn(batch)
            trainer.learner.learn(batch)
            assert trainer.learner.pop_statistics()["num_updates"] >= 2


def test_bfloat16_pixels_are_scaled_in_bfloat16_with_the_same_values():
    """Under bfloat16 autocast a CPU network takes uint8 pixels to bfloat16 in one pass
    (networks._input_dtype): the values equal float32's x / 255 rounded by autocast's
    cast, for all 256 pixel values, and so do a Nature network's outputs."""
    pixels = torch.arange(256, dtype=torch.uint8)
    scale = 1.0 / 255.0
    assert torch.equal((pixels.to(torch.bfloat16) * scale), (pixels.float() * scale).bfloat16())
    config = build_config("dqn", {"env": "pong"})
    network = make_network(config, envs.describe(config), (4, 84, 84))
    obs = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad(), autocast("bfloat16", "cpu"):
        assert _input_dtype(obs) == torch.bfloat16 and _input_dtype(obs.float()) == torch.float32
        got = network(obs).q_values
        want = network.head(network.torso(obs.float() * scale)).float()
    assert _input_dtype(obs) == torch.float32  # no autocast: float32 as before
    assert torch.equal(got, want.view_as(got))
