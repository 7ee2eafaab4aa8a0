"""What `qzoo tune` searches by default: data, one space per preset, as the specs
`--space NAME=SPEC` takes (qzoo/tools/tune_space.py parses them):

  loguniform:LOW:HIGH   a float, uniform in log space     uniform:LOW:HIGH   a float
  int:LOW:HIGH          an integer in [LOW, HIGH]         logint:LOW:HIGH    the same, log
  choice:A,B,...        one of the values, as the option takes them

After rl-baselines3-zoo's DQN sampler (hyperparams_opt.py: learning rate, batch size,
discount, exploration's end and length, training frequency, target update interval, net
width), in qzoo's names. Schedules are in frames, so the target period's choices are
the environment domain's (DOMAIN_SPACES); the command line narrows or widens any of
these (`--space learning_rate=loguniform:1e-5:1e-3`, `--space n_steps=off`).
"""

BASE = {
    "learning_rate": "loguniform:1e-5:1e-2",
    "batch_size": "choice:32,64,128,256",
    "discount": "choice:0.9,0.95,0.98,0.99,0.995,0.999",
    "exploration_epsilon_end_value": "uniform:0:0.2",
    "exploration_epsilon_decay_frame_fraction": "uniform:0.01:0.5",
    "learn_period": "choice:1,2,4,8,16",
    "n_steps": "int:1:5",
}

# What each preset adds to BASE (None: leave BASE's entry out, for a preset whose
# paper fixes it).
PRESET_SPACES = {
    "dqn": {},
    "double_q": {},
    "prioritized": {"priority_exponent": "uniform:0.3:0.9",
                    "importance_sampling_exponent_begin_value": "uniform:0.2:0.6"},
    "c51": {"vmax": "choice:10,100,200"},
    "qrdqn": {"num_quantiles": "choice:50,100,200"},
    "iqn": {"huber_param": "choice:0.5,1,2"},
    "rainbow": {"priority_exponent": "uniform:0.3:0.9", "vmax": "choice:10,100,200"},
    "ensemble": {}, "rem": {},
    "offline_dqn": {}, "offline_c51": {}, "offline_qrdqn": {},
    "r2d1": {"n_steps": None, "learn_period": None, "priority_eta": "uniform:0.5:1"},
    "r2d1_long": {"n_steps": None, "learn_period": None, "priority_eta": "uniform:0.5:1"},
    "der": {"n_steps": "int:1:20"},
    "drq_eps": {"n_steps": "int:1:20"},
}  # fmt: skip

# Values in frames, per environment domain (configuration/domains.py's scale).
DOMAIN_SPACES = {
    "atari": {"target_network_update_period": "choice:8000,16000,32000,40000,80000"},
    "minatar": {"target_network_update_period": "choice:250,500,1000,2000,4000"},
    "gym": {"target_network_update_period": "choice:100,250,500,1000,2000",
            "mlp_hidden": "choice:32,64,128,256"},
}  # fmt: skip


def default_space(agent: str, domain: str) -> dict:
    """{option: spec} that `qzoo tune AGENT` searches on an environment of `domain`."""
    space = {**BASE, **DOMAIN_SPACES.get(domain, {}), **PRESET_SPACES.get(agent, {})}
    return {name: spec for name, spec in space.items() if spec is not None}
