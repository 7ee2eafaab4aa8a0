"""The peers of benchmarks/peers.py other than qzoo, one run each in a child process:
CleanRL's single-file scripts (unmodified, from a checkout) and Stable-Baselines3's
DQN, with the settings of peer_common.ENVS."""

import os
import sys

import numpy as np
from peer_common import ENVS, Window, buffer_arrays, replay_figures


def gymnasium_029_infos(obs, rewards, terminations, truncations, infos):
    """A same-step-autoreset vector step's infos under Gymnasium 0.29's names, which
    CleanRL's scripts read when an episode ends: "final_observation" (one observation
    or None per environment) and "final_info" (one dict or None per environment)."""
    if "final_obs" in infos:
        done, final = infos["_final_obs"], infos["final_info"]
        infos["final_observation"] = np.array(
            [o if d else None for o, d in zip(infos["final_obs"], done)], dtype=object
        )
        infos["final_info"] = [_one_env(final, i) if d else None for i, d in enumerate(done)]
    return obs, rewards, terminations, truncations, infos


def _one_env(info, i):
    """Environment i's entries of a vector info dict (masks "_key" say which it has)."""
    return {k: _one_env(v, i) if isinstance(v, dict) else v[i]
            for k, v in info.items() if not k.startswith("_") and info.get("_" + k, [True] * (i + 1))[i]}  # fmt: skip


def cleanrl_folder(given):
    """The CleanRL checkout (holding cleanrl/ and cleanrl_utils/), or None."""
    folder = given or os.environ.get("QZOO_CLEANRL", "")
    ok = folder and os.path.isdir(os.path.join(folder, "cleanrl_utils"))
    return folder if ok else None


def run_cleanrl(env, warmup, steps, threads, folder):
    import runpy

    import gymnasium as gym
    import torch

    torch.set_num_threads(threads)
    if env == "pong":
        import ale_py

        gym.register_envs(ale_py)
    # CleanRL's scripts target Gymnasium 0.29; these two wrappers were renamed in 1.0.
    gym.wrappers.GrayScaleObservation = gym.wrappers.GrayscaleObservation
    gym.wrappers.FrameStack = gym.wrappers.FrameStackObservation
    s = ENVS[env]
    # Loop iteration g steps the env (call g + 1) and learns when g > learning_starts:
    # the window is iterations warmup + 1 .. warmup + steps.
    window = Window(warmup + 2, steps)
    total = warmup + 2 + steps

    class TimedSyncVectorEnv(gym.vector.SyncVectorEnv):
        calls = 0

        def __init__(self, env_fns, **kwargs):
            # Gymnasium 0.29's autoreset, which the scripts expect: the reset happens in
            # the step that ends an episode, whose last observation is in the infos.
            super().__init__(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, **kwargs)

        def step(self, actions):
            TimedSyncVectorEnv.calls += 1
            window.at(TimedSyncVectorEnv.calls)
            return gymnasium_029_infos(*super().step(actions))

    gym.vector.SyncVectorEnv = TimedSyncVectorEnv
    script = os.path.join(folder, "cleanrl", s["script"])
    sys.argv = [
        script, "--env-id", s["gym_id"], "--total-timesteps", str(total), "--no-cuda",
        "--learning-starts", str(warmup), "--buffer-size", str(s["capacity"]),
        "--batch-size", str(s["batch"]), "--train-frequency", str(s["every"]),
        "--learning-rate", str(s["lr"]), "--target-network-frequency", str(s["target"]),
        "--end-e", str(s["epsilon"]), "--exploration-fraction", str(warmup / total),
    ]  # fmt: skip
    sys.path.insert(0, folder)
    names = runpy.run_path(script, run_name="__main__")
    rb = names["rb"]
    return {**window.result, **replay_figures(buffer_arrays(rb), rb.size())}


def run_sb3(env, warmup, steps, threads):
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(threads)
    s = ENVS[env]
    if env == "pong":
        import ale_py
        import gymnasium as gym
        from stable_baselines3.common.env_util import make_atari_env

        gym.register_envs(ale_py)
        from stable_baselines3.common.vec_env import VecFrameStack

        venv = VecFrameStack(make_atari_env(s["gym_id"], n_envs=1, seed=1), n_stack=4)
        policy, kwargs = "CnnPolicy", {}
    else:
        import gymnasium as gym
        from stable_baselines3.common.vec_env import DummyVecEnv

        venv = DummyVecEnv([lambda: gym.make(s["gym_id"])])
        policy, kwargs = "MlpPolicy", {"policy_kwargs": {"net_arch": [120, 84]}}
    # SB3 trains after each `every` steps once past learning_starts: the window starts
    # right before the first update and holds steps / every of them.
    first = warmup + s["every"]
    window = Window(first, steps)
    total = first + steps + s["every"]

    class Timer(BaseCallback):
        def _on_step(self):
            window.at(self.num_timesteps)
            return True

    model = DQN(
        policy, venv, learning_rate=s["lr"], buffer_size=s["capacity"],
        learning_starts=warmup, batch_size=s["batch"], train_freq=s["every"], gradient_steps=1,
        target_update_interval=s["target"], exploration_fraction=warmup / total,
        exploration_final_eps=s["epsilon"], device="cpu", seed=1, **kwargs,
    )  # fmt: skip
    model.learn(total_timesteps=total, callback=Timer())
    rb = model.replay_buffer
    return {**window.result, **replay_figures(buffer_arrays(rb), rb.size())}
