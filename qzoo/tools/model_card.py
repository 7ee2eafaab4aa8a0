"""The model card of an exported model (its README.md), as the Hugging Face Hub reads
one: YAML front matter (library, tags, model-index with the evaluation score, the form
CleanRL and rl-baselines3-zoo push) and a body saying what the model is, how it was
evaluated, what it scored, and the command that trains it again."""

import dataclasses
import json
import math
import shlex

import qzoo.configuration as config_lib
from qzoo.configuration import environments
from qzoo.envs.scores import normalized_return
from qzoo.run.changes import RESUMABLE

PROTOCOLS = {
    "dqn_zoo": "DQN Zoo's: no sticky actions, a life lost ends an episode for learning only, "
    "up to 30 random no-ops at each start, episodes capped at 108,000 frames",
    "machado": "Machado et al. 2018's: sticky actions (0.25), no life-loss signal",
}


DOMAINS = {"gym": "Gymnasium", "minatar": "MinAtar"}


def train_command(config) -> str:
    """The `qzoo train` command that trains this config again: the agent, --env,
    --seed and every option that differs from the agent's defaults on that environment,
    less those that change how a run is executed, not its results (RESUMABLE)."""
    _, _, implied, _ = environments.interpret(config.env)
    defaults = {**config_lib.default_values(dataclasses.asdict(config)), **implied}
    args = ["qzoo", "train", config.agent, "--env", config.env, "--seed", str(config.seed)]
    for key, value in dataclasses.asdict(config).items():
        if key in ("agent", "env", "seed", *RESUMABLE) or defaults.get(key) == value:
            continue
        name = key.replace("_", "-")
        if isinstance(value, bool):
            args.append(f"--{name}" if value else f"--no-{name}")
        else:
            args += [f"--{name}", repr(value) if isinstance(value, float) else str(value)]
    return shlex.join(args)


def score(row, game) -> tuple[float, float]:
    """(mean evaluation return, its human-normalized score, NaN outside Atari's 57) of
    a results row."""
    value = float(row["eval_episode_return"])
    return value, normalized_return(game, value)


def front_matter(config, value) -> str:
    """The YAML front matter: strings as JSON strings (valid YAML, quoted safely)."""
    env_tag = config.env.replace("/", "-")
    tags = ["reinforcement-learning", "deep-reinforcement-learning", config.agent, env_tag]
    q = json.dumps
    lines = ["---", "library_name: qzoo", "tags:", *[f"- {q(t)}" for t in tags],
             "model-index:", f"- name: {q(f'{config.agent}-{env_tag}')}", "  results:",
             "  - task:", "      type: reinforcement-learning",
             "      name: reinforcement-learning", "    dataset:", f"      name: {q(config.env)}",
             f"      type: {q(config.env)}", "    metrics:", "    - type: mean_reward",
             f"      value: {value!r}", "      name: mean_reward", "      verified: false",
             "---"]  # fmt: skip
    return "\n".join(lines)


def card(config, info, rows, iteration, files, version, folder_name="MODEL", repo_id=None) -> str:
    """README.md for the network of `iteration` of a run with `config` and results
    `rows`, exported with `files` (name: what it is) by qzoo `version` as the folder
    `folder_name`, pushed to the Hub's `repo_id` if not None."""
    row = next(r for r in rows if r["iteration"] == iteration)
    value, normalized = score(row, info.game)
    last = rows[-1]["iteration"]
    which = "its last" if iteration == last else f"not its last ({last})"
    paper = config_lib.PRESETS[config.agent]["paper"]
    frames = int(row.get("frame", iteration * config.train_frames))
    episodes = row.get("eval_num_episodes")
    protocol = (
        f"Atari, protocol `{config.protocol}` ({PROTOCOLS.get(config.protocol, '')}); "
        f"{config.action_repeats} frames per action"
        if info.domain == "atari"
        else f"{DOMAINS.get(info.domain, info.domain)} environment `{info.name}`"
    )
    norm = (
        f"{normalized:.3f} (DQN Zoo's random and human scores)"
        if not math.isnan(normalized)
        else "n/a (human scores exist for Atari's 57 games only)"
    )
    episodes = "n/a" if episodes is None else episodes
    about = (
        f"A **{config.agent}** agent trained with qzoo on **{config.env}**, seed "
        f"{config.seed}: the online Q-network after iteration {iteration}, {which}, of a run "
        f"of {config.iterations} iterations."
    )
    environment = (
        f"- Environment: {protocol}; frame stack {config.frame_stack}; {info.num_actions} actions."
    )
    training = (
        f"- Training: {config.train_frames:,} frames per iteration, {frames:,} frames in "
        "all by this network."
    )
    evaluation = (
        f"- Evaluation: after each iteration, {config.eval_frames:,} frames at epsilon "
        f"{config.eval_exploration_epsilon:g}, the mean return of the episodes completed "
        "(DQN Zoo's evaluation phase)."
    )
    table = f"| {iteration} | {frames:,} | {value:g} | {episodes} | {norm} |"
    body = [f"# {config.agent} on {config.env} (qzoo)", "", about, "",
            "## Agent", "", f"`{config.agent}`: {paper}.", "",
            "## Environment and protocol", "", environment, training, evaluation, "",
            "## Results", "",
            "| iteration | frames | mean evaluation return | episodes | human-normalized |",
            "|---:|---:|---:|---:|---:|", table, ""]  # fmt: skip
    if repo_id:
        body += [f"Download it: `hf download {repo_id} --local-dir {folder_name}`.", ""]
    body += [f"Re-evaluate it: `qzoo eval {folder_name} --episodes 30 --seed 0`.", ""]
    if "curves.png" in files:
        body += ["![learning curves](curves.png)", ""]
    tools = (
        f"Exported by qzoo {version} (`qzoo export`). Watch it: `qzoo play {folder_name}`; "
        f"record it: `qzoo record {folder_name}`."
    )
    weights = (
        'Load the weights without qzoo: `safetensors.torch.load_file("model.safetensors")` '
        "(the state dict of qzoo's network for config.json)."
    )
    body += ["## Reproduce", "", "```bash", train_command(config), "```", "", tools, "",
             "## Files", "", "| file | what |", "|---|---|",
             *[f"| `{name}` | {what} |" for name, what in files.items()], "", weights, ""]  # fmt: skip
    return front_matter(config, value) + "\n\n" + "\n".join(body)
