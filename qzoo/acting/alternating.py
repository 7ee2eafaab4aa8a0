"""rlpyt's alternating sampler (B7): the environments in two halves, one half's
environment steps overlapping the other half's action selection.

The halves are the first and second half of the worker processes (workers.py). Each
`step` returns the row of one time step t of all environments, pipelined:

    wait half A's step into t  ->  actions of A at t  ->  A steps to t+1 (in flight)
    wait half B's step into t  ->  actions of B at t  ->  B steps to t+1 (in flight)
    return the row at t        ->  the learner updates while both halves step

so A's environment step overlaps B's action selection, and B's the learner's updates.
Each half has its own frame stacker; a phase takes one more `step` than a serial one
(the first, from reset, has no frames). Actions are drawn in two calls of the policy,
so its random draws differ from --acting serial's: rows are valid transitions, not
the serial rows."""

import numpy as np

from qzoo.acting.actor import Actor
from qzoo.replay.batch import Row
from qzoo.replay.frames import FrameStacker


def _concat(steps):
    return type(steps[0])(*[
        sum(s.real_steps for s in steps) if name == "real_steps"
        else np.concatenate([getattr(s, name) for s in steps])
        for name in steps[0]._fields
    ])  # fmt: skip


class AlternatingActor(Actor):
    """An Actor over a ProcessVectorEnv of an even number of workers >= 2."""

    def start(self):
        super().start()
        env, acting, info = self._env, self.acting, self.info
        half = env.num_workers // 2
        self._groups = (range(half), range(half, env.num_workers))
        self._slices = [slice(env.slices[g[0]].start, env.slices[g[-1]].stop)
                        for g in self._groups]  # fmt: skip
        self._stackers, self._obs, self._steps = [], [], []
        for s in self._slices:
            stacker = FrameStacker(s.stop - s.start, info.frame_shape, info.frame_dtype,
                                   acting.frame_stack)  # fmt: skip
            self._stackers.append(stacker)
            self._steps.append(_slice_step(self._step, s))
            self._obs.append(stacker.push(self._step.frame[s], self._step.first[s]))
        self._in_flight = [False, False]

    def step(self, frame_t=0):
        acting = self.acting
        epsilon = np.full(self.num_envs, self.epsilon(frame_t), np.float32)
        actions, values, received = [], [], False
        for h in (0, 1):
            if self._in_flight[h]:
                self._steps[h] = self._env.step_wait(self._groups[h])
                self._obs[h] = self._stackers[h].push(self._steps[h].frame, self._steps[h].first)
                self._in_flight[h], received = False, True
            reward = np.clip(self._steps[h].reward, -acting.max_abs_reward, acting.max_abs_reward)
            self.policy.observe(self._steps[h].first, reward)
            a_t, value = self.policy(self._obs[h], epsilon[self._slices[h]], self.stream.torch)
            self._env.step_async(a_t, self._groups[h])
            self._in_flight[h] = True
            actions.append(a_t)
            values.append(value * len(a_t))
        self.state_value.step(sum(values) / self.num_envs, acting.action_repeats)
        step = _concat(self._steps)
        if received:  # the transitions into t: statistics and frame counts
            self.episodes.step(step)
            new_frames = step.real_steps * acting.action_repeats
            self.frames += new_frames
            self.agent_steps += step.real_steps
        else:
            new_frames = 0
        reward = np.clip(step.reward, -acting.max_abs_reward, acting.max_abs_reward)
        row = Row(step.frame, np.concatenate(actions), reward, step.first, step.last,
                  step.terminated | step.life_loss)  # fmt: skip
        return row, new_frames

    def stop(self):
        for h in (0, 1):
            if self._in_flight[h]:  # leave the workers idle before closing them
                self._env.step_wait(self._groups[h])
                self._in_flight[h] = False
        return super().stop()


def _slice_step(step, s):
    return step._replace(**{
        name: getattr(step, name)[s] for name in step._fields if name != "real_steps"
    })  # fmt: skip
