"""Train DQN on CartPole from Python, stop it with a callback, resume it, then load the
trained agent, act with it in a loop of your own and evaluate it.

    python examples/train_and_act.py        # about two minutes on a laptop CPU

QZOO_QUICK=1 runs a few seconds' version (the test suite's)."""

import os

import qzoo

QUICK = os.environ.get("QZOO_QUICK") == "1"
SIZE = {"iterations": 4, "train_frames": 500, "eval_frames": 250} if QUICK else {"iterations": 10}


def log(row):
    """A callback: a line of your own per results row (after its checkpoint is saved)."""
    print(
        f"  iteration {row['iteration']}: eval return {row['eval_episode_return']:.1f}, "
        f"mean Q {row['train_mean_q']:.2f}"
    )


def main():
    config = qzoo.config("dqn", env="CartPole-v1", seed=3, tensorboard=False, **SIZE)
    run_dir = "runs/example-dqn-cartpole"

    # Stop at half the iterations (a wall-clock budget or a return threshold work the
    # same way: qzoo.StopAfterTime, qzoo.StopAtReturn), then resume: the same run.
    half = config.iterations // 2
    result = qzoo.train(
        config,
        run_dir=run_dir,
        progress=False,
        callbacks=[log, lambda row: row["iteration"] < half],
    )
    print("stopped:", result.stopped)
    result = qzoo.resume(run_dir, progress=False, callbacks=[log])
    print(f"finished {len(result.rows) - 1} iterations; final return {result.final_return:.1f}")

    # The trained agent in a loop of your own, with the environment it was trained on.
    agent = qzoo.load(run_dir)
    env = agent.make_env(seed=0)
    obs, _ = env.reset()
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
        total += reward
        done = terminated or truncated
    print(f"one greedy episode: return {total:.0f}; Q-values at its end {agent.q_values(obs)}")

    # What `qzoo eval --json` reports, as a dict.
    scores = qzoo.evaluate(agent, episodes=5, seed=0)
    print("evaluation over 5 episodes:", scores["return"])


if __name__ == "__main__":
    main()
