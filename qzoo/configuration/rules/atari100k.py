"""Atari 100k's parts (learning/augmentation.py, --eval-episodes): what they do not
take."""


def atari100k_relations(c, domain):
    relations = []
    if c.augmentation != "none":
        relations += [
            (("augmentation", "env"), domain in ("atari", "minatar"),
             f"none for {domain} environments (it shifts images: Atari or MinAtar frames)"),
            (("augmentation", "recurrent"), not c.recurrent,
             "none with --recurrent (R2D1's sequences are not augmented)"),
            (("augmentation", "prefetch_targets"), not c.prefetch_targets,
             "none with --prefetch-targets (its targets would see unshifted frames)"),
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
