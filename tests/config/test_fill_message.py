"""A run that would end before its replay fills (so before it learns) is refused with
the values that would make it valid, worked out from its config: each one alone must
build, and one step past it must not."""

import pytest

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.errors import UserError

# DQN on Pong: --min-replay-capacity-fraction 0.05 of --replay-capacity 1,000,000 is
# 50,000 transitions, 4 frames each (--action-repeats 4): 200,000 frames to fill. A run
# of 1 x 1,000 frames holds at most (1,000 - 1) // 4 = 249 transitions before its end,
# so: --train-frames 200,001 (or --iterations 201, of 1,000 frames); a replay whose
# 5% is at most 249: int(0.05 x 4,999) = 249, int(0.05 x 5,000) = 250; or a fraction
# of 1,000,000 that is at most 249: 0.000249 (0.00025 gives 250).
PONG = ["train", "dqn", "--iterations", "1", "--train-frames", "1000"]
PONG_FIXES = {"train_frames": (200_001, 200_000), "iterations": (201, 200),
              "replay_capacity": (4_999, 5_000),
              "min_replay_capacity_fraction": (0.000249, 0.00025)}  # fmt: skip
# CartPole (1 frame per step, DQN's CartPole fraction 0.02): 0.02 x 100,000 = 2,000
# frames to fill; a run of 2 x 100 = 200 frames holds at most 199 transitions: 0.02 x
# 9,999 = 199.98 -> 199, 0.02 x 10,000 = 200; 0.00199 x 100,000 = 199.
CARTPOLE = ["train", "dqn", "--env", "CartPole-v1", "--replay-capacity", "100000",
            "--train-frames", "100", "--iterations", "2"]  # fmt: skip
CARTPOLE_FIXES = {"train_frames": (1_001, 1_000), "iterations": (21, 20),
                  "replay_capacity": (9_999, 10_000),
                  "min_replay_capacity_fraction": (0.00199, 0.002)}  # fmt: skip


def _options(argv):
    return {argv[i][2:].replace("-", "_"): argv[i + 1] for i in range(2, len(argv), 2)}


@pytest.mark.parametrize("argv, fixes", [(PONG, PONG_FIXES), (CARTPOLE, CARTPOLE_FIXES)])
def test_the_message_names_the_values_that_would_fill_the_replay(argv, fixes, tmp_path, capsys):
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    more = (
        f"--train-frames {fixes['train_frames'][0]} or --iterations "
        f"{fixes['iterations'][0]} (or more)"
    )
    less = (
        f"--replay-capacity {fixes['replay_capacity'][0]} or --min-replay-capacity-fraction "
        f"{fixes['min_replay_capacity_fraction'][0]} (or less)"
    )
    assert err.rstrip().endswith(f"before learning starts; any one of these would do: {more}; "
                                 f"{less}"), err  # fmt: skip
    assert not (tmp_path / "run").exists()
    options = _options(argv)
    for name, (fix, past) in fixes.items():
        build_config("dqn", {**options, name: str(fix)})  # valid
        with pytest.raises(UserError, match="before learning starts"):
            build_config("dqn", {**options, name: str(past)})


def test_without_room_for_a_batch_only_more_frames_are_offered(tmp_path, capsys):
    """2 x 10 CartPole frames hold at most 19 transitions, fewer than a batch of 32: no
    smaller replay would do, only more frames (2,000 + 1 over 2 iterations: 1,001)."""
    argv = CARTPOLE[:-4] + ["--train-frames", "10", "--iterations", "2"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(
        "any one of these would do: --train-frames 1001 or --iterations 201 (or more)"
    ), err
