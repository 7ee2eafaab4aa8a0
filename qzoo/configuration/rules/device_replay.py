"""Replay on a torch device (replay/device.py) and the captured update
(learning/captured.py): what they do not take."""


# Replay on a torch device (replay/device.py): what it does not take yet.
def device_replay_relations(c):
    if c.replay_device == "host":
        return []
    not_built = "host with {}: not built for replay on a torch device yet"
    return [
        (("replay_device", "replay_compression"), c.replay_compression == "none",
         "host with --replay-compression (frames on a device are kept uncompressed)"),
        (("replay_device", "recurrent"), not c.recurrent, not_built.format("--recurrent")),
        (("replay_device", "offline"), not c.offline,
         "host with --offline (a dataset is read on the host)"),
        (("replay_device", "ray"), not c.ray, not_built.format("--ray")),
        # Replay on the GPU and a learner on the CPU would copy every batch back.
        (("replay_device", "device"), not (c.replay_device == "cuda" and c.device == "cpu"),
         "host or cpu with --device cpu (replay on the GPU would send every batch back)"),
    ]  # fmt: skip


# --capture (learning/captured.py): the whole update in one graph, over a replay on the
# device.
def capture_relations(c):
    if not c.capture:
        return []
    return [
        (("capture_updates", "acting"), c.capture_updates == 1 or c.acting != "async",
         "1 with --acting async (its learner makes one update at a time)"),
        (("capture_updates", "target_count_updates"),
         c.capture_updates == 1 or not c.target_count_updates,
         ("1 with --target-count-updates (a target copy may fall between two updates of "
          "one call)")),
        (("capture", "replay_device"), c.replay_device != "host",
         ("false with --replay-device host (the draw is captured with the update: use "
          "--replay-device cpu or cuda, the learner's device)")),
        (("capture", "compile"), not c.compile,
         "false with --compile (--capture compiles the whole update, the draw included)"),
        (("capture", "prefetch_targets"), not c.prefetch_targets,
         "false with --prefetch-targets (the captured update computes its own targets)"),
        (("capture", "recurrent"), not c.recurrent,
         "false with --recurrent (torch.compile does not trace R2D1's LSTM)"),
    ]  # fmt: skip


ACTS_ONLY_WITH = {"capture_updates": (None, (), lambda c, d: c.capture, "--capture")}
