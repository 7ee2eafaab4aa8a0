"""Atari 100k's parts (learning/augmentation.py, --eval-episodes): what they do not
take."""

# Options that --eval-episodes N (an evaluation of N whole episodes, one per environment,
# however many frames they take) leaves without effect: config/validate.py's table.
_BY_EPISODES = ("--eval-episodes 0 (with --eval-episodes N, each evaluation plays N whole "
                "episodes, one per environment, however many frames they take)")  # fmt: skip
ACTS_ONLY_WITH = {
    "eval_frames": (None, (), lambda c, d: not c.eval_episodes, _BY_EPISODES),
    "eval_finish_episodes": (False, (), lambda c, d: not c.eval_episodes, _BY_EPISODES),
}


def atari100k_relations(c, domain):
    relations = []
    if c.augmentation != "none":
        # Worded for whichever option is blamed: the one given on the command line.
        unaugmented = "(R2D1's sequences are not augmented)"
        unshifted = "(its targets would see unshifted frames)"
        relations += [
            (("augmentation", "env"), domain in ("atari", "minatar"),
             f"none for {domain} environments (it shifts images: Atari or MinAtar frames)"),
            (("augmentation", "recurrent"), not c.recurrent,
             {"augmentation": f"none with --recurrent {unaugmented}",
              "recurrent": f"false with --augmentation {c.augmentation} {unaugmented}"}),
            (("augmentation", "prefetch_targets"), not c.prefetch_targets,
             {"augmentation": f"none with --prefetch-targets {unshifted}",
              "prefetch_targets": f"false with --augmentation {c.augmentation} {unshifted}"}),
        ]  # fmt: skip
    if c.shift_offsets != "image":
        relations += [
            (("shift_offsets", "augmentation"), c.augmentation != "none",
             "image with --augmentation none (there is no shift to draw)"),
        ]  # fmt: skip
    if c.eval_episodes:
        not_built = "0 with {}: episodes are counted by the local evaluator only"
        relations += [
            (("eval_episodes", "recurrent"), not c.recurrent,
             "0 with --recurrent (R2D1's evaluator keeps --num-envs recurrent states)"),
            (("eval_episodes", "ray"), not c.ray, not_built.format("--ray")),
            (("eval_episodes", "actor_workers"), c.actor_workers == 1,
             not_built.format("--actor-workers above 1")),
        ]  # fmt: skip
    return relations
