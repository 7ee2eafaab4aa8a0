"""Bad input, tried as a new user would: every case is one line on stderr naming the bad
value, exit code 2, no traceback, and nothing written. Also --help and --version."""

import dataclasses
import os
import re
import subprocess
import sys

import pytest
import torch
from helpers import REPO

import qzoo.configuration as config_lib
from qzoo.cli.main import main
from qzoo.errors import flag, shown

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
CARTPOLE = ["--env", "CartPole-v1"]
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

# (argv after `qzoo`, a fragment of the error line that names the bad value)
TRAIN = [
    # The examples, literally.
    (["train", "dqn", "--max-abs-reward", "nan"], "--max-abs-reward: bad value nan; expected"),
    (["train", "dqn", "--rmsprop-decay", "2"], "--rmsprop-decay: bad value 2; expected"),
    (["train", "c51", "--vmax", "inf"], "--vmax: bad value inf; expected a finite number > 0"),
    (["train", "dqn", "--vmax", "inf"], "--vmax: bad value inf"),
    (["train", "dqn", "--n-steps", "100000"], "--n-steps: bad value 100000; expected"),
    (["train", "dqn", "--iterations", "1e30"], "--iterations: bad value 1e30; expected"),
    (["train", "dqn", "--env", ""], "--env: bad value ''; expected"),
    pytest.param(["train", "dqn", "--device", "cuda"], "--device: bad value cuda", marks=NO_GPU),
    # Unknown, misspelt, abbreviated, missing and mistyped options.
    (["train", "dqn", "--frobnicate", "1"], "unknown option --frobnicate"),
    (["train", "dqn", "--learnig-rate", "1e-4"], "--learnig-rate; did you mean --learning-rate?"),
    (["train", "dqn", "--learning", "1e-4"], "unknown option --learning; did you mean"),
    (["train", "dqn", "--replay", "1000"], "unknown option --replay"),
    (["train", "dqn", "--seed"], "--seed: needs a value"),
    (["train", "dqn", "--seed", "x"], "--seed: bad value x; expected an integer"),
    (["train", "dqn", "--num-envs", "2.5"], "--num-envs: bad value 2.5"),
    (["train", "dqn", "--learning-rate", "fast"], "--learning-rate: bad value fast"),
    (["train", "dqn", "--double-q", "maybe"], "--double-q: bad value maybe; expected true or false"),
    (["train", "dqn", "--no-double-q", "false"], "--no-double-q takes no value"),
    (["train", "dqn", "extra"], "unexpected argument 'extra'"),
    (["train", "rainbw"], "unknown agent 'rainbw'"),
    (["train"], "train needs an agent"),
    (["train", "--seed", "1"], "train needs an agent"),
    # Domains.
    (["train", "dqn", "--discount", "2"], "--discount: bad value 2; expected a number in [0, 1]"),
    (["train", "dqn", "--learning-rate", "-1"], "--learning-rate: bad value -1"),
    (["train", "dqn", "--learning-rate", "0"], "--learning-rate: bad value 0"),
    (["train", "dqn", "--optimizer-epsilon", "0"], "--optimizer-epsilon: bad value 0"),
    (["train", "dqn", "--max-global-grad-norm", "inf"], "--max-global-grad-norm: bad value inf"),
    (["train", "dqn", "--exploration-epsilon-end-value", "1.5"], "end-value: bad value 1.5"),
    (["train", "dqn", "--eval-exploration-epsilon", "-0.1"], "epsilon: bad value -0.1"),
    (["train", "dqn", "--exploration-epsilon-decay-frame-fraction", "2"], "fraction: bad value 2"),
    (["train", "dqn", "--min-replay-capacity-fraction", "0"], "fraction: bad value 0"),
    (["train", "dqn", "--seed", "-1"], "--seed: bad value -1; expected an integer in [0, 2^32)"),
    (["train", "dqn", "--seed", "4294967296"], "--seed: bad value 4294967296"),
    (["train", "dqn", "--batch-size", "0"], "--batch-size: bad value 0"),
    (["train", "dqn", "--replay-capacity", "1e400"], "--replay-capacity: bad value 1e400"),
    (["train", "dqn", "--frame-stack", "0"], "--frame-stack: bad value 0"),
    (["train", "dqn", "--learn-period", "0"], "--learn-period: bad value 0"),
    (["train", "dqn", "--target-network-update-period", "-5"], "period: bad value -5"),
    (["train", "dqn", "--threads", "-1"], "--threads: bad value -1"),
    (["train", "dqn", "--tensorboard", "maybe"], "--tensorboard: bad value maybe"),
    (["train", "dqn", "--optimizer", "sgd"], "--optimizer: bad value sgd; expected one of"),
    (["train", "dqn", "--distribution", "gaussian"], "--distribution: bad value gaussian"),
    (["train", "dqn", "--protocol", "sticky"], "expected one of dqn_zoo, machado"),
    (["train", "prioritized", "--priority-exponent", "2"], "--priority-exponent: bad value 2"),
    (["train", "prioritized", "--uniform-sample-probability", "nan"], "probability: bad value nan"),
    (["train", "prioritized", "--importance-sampling-exponent-begin-value", "2"], "bad value 2"),
    (["train", "rainbow", "--noisy-weight-init", "0"], "--noisy-weight-init: bad value 0"),
    (["train", "c51", "--num-atoms", "1"], "--num-atoms: bad value 1"),
    (["train", "c51", "--vmax", "0"], "--vmax: bad value 0"),
    (["train", "qrdqn", "--huber-param", "-1"], "--huber-param: bad value -1"),
    (["train", "dqn", "--max-abs-reward", "-1"], "--max-abs-reward: bad value -1"),
    # Relations between options.
    (["train", "dqn", *CARTPOLE, "--log-replay", "logs"],
     "--log-replay logs: the DQN Replay Dataset holds uint8 frames of one environment"),
    (["train", "dqn", "--env", "minatar/breakout", "--log-replay", "logs", "--num-envs", "2"],
     "--log-replay logs: the DQN Replay Dataset holds uint8 frames"),
    (["train", "dqn", "--offline-reload", "5"],
     "--offline-reload: bad value 5; expected no --offline-reload here"),
    (["train", "dqn", "--offline-checkpoints", "40:"], "--offline-checkpoints: bad value"),
    (["train", "dqn", "--offline-transitions", "1000"], "--offline-transitions: bad value 1000"),
    (["train", "dqn", "--offline", "no-such-dataset"],
     "--offline no-such-dataset: no DQN Replay Dataset there"),
    (["train", "dqn", "--offline", "data", "--log-replay", "logs"],
     "no --log-replay with --offline"),
    (["train", "dqn", "--acting", "paralel"], ("expected one of serial, parallel, alternating, "
     "async (did you mean parallel?)")),
    (["train", "dqn", *CARTPOLE, "--replay-ratio", "0.001", "--iterations", "3",
      "--train-frames", "1000"],
     ("--replay-ratio: bad value 0.001; expected one high enough for an update in the run: "
     "0.001 gives one per 64,000 frames (--batch-size x action repeats / R), and the run learns "
     "over 2,000 frames")),
    (["train", "dqn", "--replay-ratio", "1e9"], "--replay-ratio: bad value 1e9; expected a number"),
    (["train", "dqn", *CARTPOLE, "--ray", "--eps-final-min", "0.001"],
     ("--eps-final-min: bad value 0.001; expected no --eps-final-min here: it only acts with a run "
     "without --ray")),
    (["train", "dqn", *CARTPOLE, "--num-envs", "4", "--eps-final-min", "0.5"],
     ("--eps-final-min: bad value 0.5; expected 0 (off) or at most "
      "--exploration-epsilon-end-value (0.1): the smallest of the finals")),
    (["train", "r2d1", *CARTPOLE, "--no-recurrent"],
     "--recurrent: bad value false; expected true for r2d1, whose values are R2D1's"),
    (["train", "dqn", "--env", "minatar/breakout", "--log-replay-capacity", "500"],
     ("--log-replay-capacity: bad value 500; expected no --log-replay-capacity here: it only "
     "acts with --log-replay")),
    (["train", "prioritized", "--offline", "data"],
     "--offline: bad value data; expected --prioritized false with --offline (a dataset"),
    (["train", "dqn", "--iterations", "1", "--train-frames", "1000"],
     "--iterations: bad value 1; expected --iterations x --train-frames (1 x 1000 frames)"),
    (["train", "dqn", *CARTPOLE, "--replay-capacity", "100000", "--train-frames", "100",
      "--iterations", "2"], "--iterations: bad value 2; expected --iterations x --train-frames"),
    (["train", "rainbow", "--no-noisy"], "--noisy: bad value false; expected some exploration"),
    (["train", "dqn", "--min-replay-capacity-fraction", "1e-6"], "fraction: bad value 1e-06; expected"),
    (["train", "dqn", "--train-frames", "2"], "--train-frames: bad value 2"),
    (["train", "dqn", "--num-envs", "8", "--eval-frames", "16"], "--eval-frames: bad value 16"),
    (["train", "dqn", "--max-frames-per-episode", "3"], "--max-frames-per-episode: bad value 3"),
    (["train", "dqn", *CARTPOLE, "--replay-capacity", "1000", "--num-envs", "100",
      "--min-replay-capacity-fraction", "0.1", "--n-steps", "10"], "--n-steps: bad value 10"),
    (["train", "dqn", *CARTPOLE, "--action-repeats", "4"], "--action-repeats: bad value 4"),
    (["train", "dqn", *CARTPOLE, "--torso", "nature_cnn"], "--torso: bad value nature_cnn"),
    (["train", "dqn", "--env", "minatar/breakout", "--torso", "nature_cnn"], "bad value nature"),
    # Options that would have no effect for this agent and environment.
    (["train", "c51", "--grad-error-bound", "0.5"], "--grad-error-bound: bad value 0.5"),
    (["train", "dqn", "--distribution", "categorical"],
     "--distribution categorical: dqn's --grad-error-bound 0.03125 would have no effect"),
    (["train", "dqn", "--shared-bias", "--dueling"], "--shared-bias: bad value true"),
    (["train", "rainbow", "--shared-bias"], "--shared-bias: bad value true"),
    (["train", "double_q", "--dueling"], "--dueling true: double_q's --shared-bias true"),
    (["train", "dqn", "--num-atoms", "21"], "--num-atoms: bad value 21; expected no --num-atoms"),
    (["train", "dqn", "--tau-samples-policy", "8"], "--tau-samples-policy: bad value 8"),
    (["train", "rainbow", "--num-quantiles", "8"], "--num-quantiles: bad value 8"),
    (["train", "dqn", "--noisy-weight-init", "0.5"], "--noisy-weight-init: bad value 0.5"),
    (["train", "dqn", "--priority-exponent", "0.5"], "--priority-exponent: bad value 0.5"),
    (["train", "c51", "--rmsprop-decay", "0.9"], "--rmsprop-decay: bad value 0.9"),
    (["train", "dqn", "--mlp-hidden", "128"], "--mlp-hidden: bad value 128"),
    # Issue 34 #3: was accepted and ignored (each evaluation played 100 whole games).
    (["train", "der", "--env", "pong", "--eval-frames", "2000"],
     ("--eval-frames: bad value 2000; expected no --eval-frames here: it only acts with "
      "--eval-episodes 0 (with --eval-episodes N, each evaluation plays N whole episodes, one "
      "per environment, however many frames they take)")),
    # Worded for the option blamed: the one given, against the preset's augmentation.
    (["train", "drq_eps", "--env", "pong", "--acting", "async", "--prefetch-targets"],
     "--prefetch-targets: bad value true; expected false with --augmentation shift_intensity"),
    (["train", "drq_eps", "--env", "pong", "--recurrent"],
     "--recurrent: bad value true; expected false with --augmentation shift_intensity"),
    (["train", "drq_eps", "--env", "pong", "--eval-finish-episodes"],
     ("--eval-finish-episodes: bad value true; expected false here: it only acts with "
      "--eval-episodes 0")),
    (["train", "dqn", "--eval-episodes", "4", "--eval-frames", "1000"],
     "--eval-frames: bad value 1000; expected no --eval-frames here"),
    # --mlp-layers: widths, on an MLP torso, not beside --mlp-hidden or --recurrent.
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "120,,84"],
     "--mlp-layers: bad value 120,,84; expected '' or 1 to 8 comma-separated integers"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "0"], "--mlp-layers: bad value 0; expected"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "a,b"], "--mlp-layers: bad value a,b"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "\u00b2"], "--mlp-layers: bad value \u00b2"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "-5"], "--mlp-layers: bad value -5"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", ",".join(["8"] * 9)], "1 to 8 comma-separated"),
    (["train", "dqn", *CARTPOLE, "--mlp-layers", "64", "--mlp-hidden", "32"],
     ("--mlp-hidden: bad value 32; expected no --mlp-hidden here: it only acts with the mlp "
     "torso (a vector environment's, or --torso mlp) and no --mlp-layers")),
    (["train", "r2d1", *CARTPOLE, "--mlp-layers", "64"],
     ("--mlp-layers: bad value 64; expected '' here: it only acts with the mlp torso (a "
     "vector environment's, or --torso mlp) and no --recurrent")),
    (["train", "dqn", "--mlp-layers", "64"],
     "--mlp-layers: bad value 64; expected '' here: it only acts with the mlp torso"),
    (["train", "dqn", *CARTPOLE, "--protocol", "machado"], "--protocol: bad value machado"),
    # Multi-head agents, CQL and Dopamine's optimizers.
    (["train", "ensemble", "--num-heads", "0"], "--num-heads: bad value 0; expected an integer"),
    (["train", "rem", "--num-heads", "1e5"], "--num-heads: bad value 1e5"),
    (["train", "rem", "--head-mixing", "average"], "expected one of identity, stochastic"),
    (["train", "dqn", "--head-mixing", "stochastic"],
     "expected no --head-mixing here: it only acts with --num-heads above 1"),
    (["train", "dqn", "--separate-networks"], "--separate-networks: bad value true"),
    (["train", "rem", "--num-heads", "1"],
     "--num-heads 1: rem's --separate-networks true would have no effect"),
    (["train", "ensemble", "--distribution", "quantile"],
     "--distribution: bad value quantile; expected --num-heads 1 or --distribution none"),
    (["train", "qrdqn", "--num-heads", "4"], "--num-heads: bad value 4; expected --num-heads 1"),
    (["train", "rem", "--distribution", "categorical"], "--distribution: bad value categorical"),
    (["train", "offline_dqn", "--cql-alpha", "-1"], "--cql-alpha: bad value -1; expected a fin"),
    (["train", "offline_qrdqn", "--cql-alpha", "nan"], "--cql-alpha: bad value nan"),
    (["train", "rem", "--cql-alpha", "inf"], "--cql-alpha: bad value inf"),
    (["train", "offline_dqn", "--cql-alpha", "lots"], "--cql-alpha: bad value lots"),
    (["train", "offline_c51", "--rmsprop-decay", "0.9"], "--rmsprop-decay: bad value 0.9"),
    (["train", "dqn", "--optimizer", "adam_tf2"], "--optimizer: bad value adam_tf2"),
    (["train", "rem", *CARTPOLE, "--protocol", "machado"], "--protocol: bad value machado"),
    # Environments.
    (["train", "dqn", "--env", "ponng"], "--env: bad value ponng; expected"),
    (["train", "dqn", "--env", "ALE/Pong-ram-v5"], "--env: bad value ALE/Pong-ram-v5"),
    (["train", "dqn", "--env", "MountainCarContinuous-v0"], "expected discrete actions"),
    (["train", "dqn", "--env", "minatar/breakot"], "did you mean minatar/breakout?"),
    (["train", "dqn", "--env", "cartpole-v1"], "did you mean CartPole-v1?"),
    # A Discrete observation is what Taxi lacks (its actions are discrete), whether this
    # Gymnasium registers Taxi-v3 or, as 1.x, Taxi-v4 in its place.
    (["train", "dqn", "--env", "Taxi-v3"],
     "expected a Box observation (an array), not Discrete(500), one integer per state"),
    (["train", "dqn", "--env", "FrozenLake-v1"], "FrozenLake-v1; expected a Box observation"),
    # Suggestions that mean the option (an alias), not one that shares letters.
    (["train", "dqn", "--lr", "1e-4"], "unknown option --lr; did you mean --learning-rate?"),
    (["train", "dqn", "--game", "pong"], "unknown option --game; did you mean --env?"),
    # Issue 34 #14: a repeated option was accepted, the last one winning.
    (["train", "dqn", "--seed", "1", "--seed", "2"],
     "--seed: given twice (--seed 1 and --seed 2); expected it once"),
    (["train", "dqn", "--dueling", "--no-dueling"],
     "--dueling: given twice (--dueling and --no-dueling); expected it once"),
    (["train", "dqn", "--threads", "1000"],
     f"--threads: bad value 1000; expected 0 (auto) or an integer in [1, {CORES}]"),
]  # fmt: skip

BENCH = [
    (["bench", "train", "--log-replay", "logs"], "bench train takes no --log-replay: it writes"),
    (["bench"], "bench needs replay or train, got nothing"),
    (["bench", "frobnicate"], "bench needs replay or train, got frobnicate"),
    (["bench", "replay", "--capacity", "0"], "--capacity: bad value 0"),
    (["bench", "replay", "--capacity", "3"], "--capacity: bad value 3; expected room"),
    (["bench", "replay", "--seconds", "nan"], "--seconds: bad value nan"),
    (["bench", "replay", "--prioritized", "maybe"], "--prioritized: bad value maybe"),
    (["bench", "replay", "--capacty", "10"], "unknown option --capacty; did you mean --capacity?"),
    (["bench", "train", "--agent", "rainbw"], "--agent: bad value rainbw"),
    (["bench", "train", "--frames", "0"], "--frames: bad value 0"),
    (["bench", "train", "--frames", "1e30"], "--frames: bad value 1e30"),
    (["bench", "train", "--warmup-transitions", "2000000"], "transitions: bad value 2000000"),
    (["bench", "train", "--run-dir", "x"], "takes no --run-dir"),
    (["bench", "train", "--max-abs-reward", "nan"], "--max-abs-reward: bad value nan"),
    (["bench", "train", "--n-steps", "100000"], "--n-steps: bad value 100000"),
    (["bench", "train", "--env", ""], "--env: bad value ''"),
    (["bench", "train", "--learnig-rate", "1"], "did you mean --learning-rate?"),
    pytest.param(["bench", "train", "--device", "cuda"], "--device: bad value cuda", marks=NO_GPU),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["trian", "dqn"], "unknown command 'trian'; expected train, resume, agents"),
    (["trian", "--env", "pong"], "(did you mean train?)"),
    (["--acting", "x"], "unknown option --acting"),  # the first mistake comes first
    (["dataset", "infoo", "x"], "qzoo dataset needs info or convert, got 'infoo' (did you mean"),
    (["suite", "reprt", "x"], "suite takes options or report first, got 'reprt' (did you mean"),
    (["bench", "train", "--lr", "1"], "unknown option --lr; did you mean --learning-rate?"),
    (["--versio"], "unknown option --versio; did you mean --version?"),
    # Issue 34 #14: a repeated option was accepted, the last one winning.
    (["resume", "x", "--threads", "1", "--threads=2"],
     "--threads: given twice (--threads 1 and --threads=2); expected it once"),
    (["eval", "x", "--episodes", "1", "--episodes", "2"], "--episodes: given twice"),
    (["compare", "x", "--raw", "--raw"], "--raw: given twice (--raw and --raw); expected it once"),
    (["dataset", "info", "x", "--stack", "1", "--stack", "2"], "--stack: given twice"),
    (["suite", "--agents", "dqn", "--agents", "c51", "--games", "pong"], "--agents: given twice"),
    (["tune", "dqn", "--env", "CartPole-v1", "--", "--discount", "0.9", "--discount", "0.8"],
     "--discount: given twice (--discount 0.9 and --discount 0.8); expected it once"),
]  # fmt: skip


def _one_error_line(err, fragment):
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if not line.startswith("qzoo: note:")]
    assert len(lines) == 1 and lines[0].startswith("qzoo: error: "), err
    assert fragment in lines[0], err


@pytest.mark.parametrize("argv, fragment", TRAIN + BENCH)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(argv, fragment, tmp_path, monkeypatch,
                                                         capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)  # a default run folder would land here
    run_dir = tmp_path / "run"
    extra = ["--run-dir", str(run_dir)] if argv[:1] == ["train"] and len(argv) > 1 else []
    assert main(argv + extra) == 2
    _one_error_line(capsys.readouterr().err, fragment)
    assert not run_dir.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["train", "dqn", "--iterations", "1e30"], "--iterations: bad value 1e30"),
        (["bench", "train", "--vmax", "-inf"], "--vmax: bad value -inf"),
        (["train", "c51", "--grad-error-bound", "0.5"], "--grad-error-bound: bad value 0.5"),
        # The commands, literally.
        (["trian", "dqn"], "unknown command 'trian'; expected train, resume, agents, bench"),
        (["train", "dqn", "--lr", "1e-4"], "unknown option --lr; did you mean --learning-rate?"),
        (["profile", "act", "--evn", "pong"], "unknown option --evn; did you mean --env?"),
        (["train", "dqn", "--env", "Taxi-v3"], "not Discrete(500), one integer per state"),
        (["train", "dqn", "--threads", "1000"], "--threads: bad value 1000; expected 0 (auto)"),
    ],
)
def test_bad_input_in_a_real_process(argv, fragment, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "qzoo", *argv], capture_output=True,
                            text=True, cwd=tmp_path, env=env, check=False)  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    _one_error_line(result.stderr, fragment)
    assert os.listdir(tmp_path) == []


def _help_defaults(text):
    """{--option: the default its help shows} from `--help` output, however wrapped."""
    entries, current = {}, None
    for line in text.splitlines():
        match = re.match(r"^  (--[a-z0-9-]+)", line)
        if match:
            current = match[1]
            entries[current] = line
        elif current and line.startswith("      "):
            entries[current] += line
        else:
            current = None
    return {name: re.findall(r"\(default: (.*?)\)", " ".join(entry.split()))[-1]
            for name, entry in entries.items() if "(default: " in entry}  # fmt: skip


@pytest.mark.parametrize("agent", list(config_lib.PRESETS))
@pytest.mark.parametrize("env", [None, "CartPole-v1", "minatar/breakout"])
def test_help_lists_every_option_with_the_presets_default(agent, env, capsys):
    argv = ["train", agent, "--help"] + (["--env", env] if env else [])
    assert main(argv) == 0
    out = capsys.readouterr().out
    for group in config_lib.GROUPS:
        assert f"{group} options:" in out
    shown_defaults = _help_defaults(out)
    config = config_lib.build_config(agent, {"env": env} if env else {})
    for field in dataclasses.fields(config_lib.Config):
        if field.name != "agent":
            assert shown_defaults[flag(field.name)] == shown(getattr(config, field.name)), field
            assert field.metadata["help"].split()[0] in out


def test_version_and_top_level_help(capsys):
    import qzoo

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"qzoo {qzoo.__version__}"
    assert main(["--help"]) == 0 and "train" in capsys.readouterr().out
    assert main(["bench", "train", "--help"]) == 0
    assert "--warmup-transitions" in capsys.readouterr().out


@pytest.mark.parametrize("env", ["pong", "minatar/breakout", "CartPole-v1"])
@pytest.mark.parametrize("agent", list(config_lib.PRESETS))
def test_every_preset_validates_on_every_domain(agent, env):
    config = config_lib.build_config(agent, {"env": env}, strict=True)
    assert config.agent == agent


def test_every_field_has_a_group_a_meaning_and_a_domain():
    for field in dataclasses.fields(config_lib.Config):
        assert field.metadata["group"] in config_lib.GROUPS, field.name
        assert field.metadata["help"] and field.metadata["domain"] is not None, field.name
        assert "\n" not in field.metadata["help"]
