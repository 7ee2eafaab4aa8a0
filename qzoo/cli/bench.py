"""`qzoo bench replay|train`: speed and memory figures as JSON lines (run/bench.py)."""

import dataclasses

import qzoo.configuration as config_lib
from qzoo.cli.parser import Parser, add_options, config_fields, defaults_for, parse, value_of
from qzoo.configuration import build_config
from qzoo.configuration import values as options_lib
from qzoo.errors import UserError, closest, flag, shown


def bench_command(argv):
    """`qzoo bench replay [options]` or `qzoo bench train [train options]`."""
    from qzoo.run import bench

    kind = argv[0] if argv else None
    usage = {
        "replay": "qzoo bench replay [--option value ...]",
        "train": "qzoo bench train [--agent A] [--frames N] [--warmup-transitions N] "
        "[train option ...]",
    }.get(kind, "qzoo bench replay|train [--option value ...]")
    parser = Parser(
        prog=f"qzoo bench {kind}", usage=usage, description=bench.__doc__.split("\n\n")[1]
    )
    if kind in ("-h", "--help"):
        parser.print_help()
    elif kind == "replay":
        _bench_replay(parser, argv[1:])
    elif kind == "train":
        _bench_train(parser, argv[1:])
    else:
        hint = closest(kind or "", ("replay", "train"))
        raise UserError(
            f"bench needs replay or train, got {shown(kind or 'nothing')}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def _bench_replay(parser, argv):
    from qzoo.run import bench

    fields = {f.name: f for f in dataclasses.fields(bench.ReplayBench)}
    values = dataclasses.asdict(bench.ReplayBench())
    add_options(parser, fields.values(), values)
    for name, text in parse(parser, argv).items():
        values[name] = options_lib.parse(fields[name], text)
    bench.check_replay_bench(**values)
    bench.bench_replay(**values)


def _bench_train(parser, argv):
    from qzoo.run import bench, threads

    own = {f.name: f for f in dataclasses.fields(bench.TrainBench)}
    own_values = dataclasses.asdict(bench.TrainBench())
    shown_defaults = dict(own_values)
    if any(token in ("-h", "--help") for token in argv):
        agent = value_of("--agent", argv) or own_values["agent"]
        config_lib.check_agent(agent)
        shown_defaults.update(defaults_for(agent, argv), agent=agent)
    add_options(parser, own.values(), shown_defaults, title="bench train")
    fields = [f for f in config_fields() if f.name not in bench.UNUSED_BY_BENCH]
    add_options(parser, fields, {**dict.fromkeys(config_lib.FIELDS, ""), **shown_defaults})
    why = "it writes nothing and does not evaluate"
    refused = {flag(prefix + name): why for name in bench.UNUSED_BY_BENCH for prefix in ("", "no_")}
    options = parse(parser, argv, refused)
    for name, field in own.items():
        if name in options:
            own_values[name] = options_lib.parse(field, options.pop(name))
    config = build_config(own_values["agent"], options, strict=True)
    bench.check_train_bench(config, own_values["warmup_transitions"])
    threads.apply(config)
    bench.measure_train(config, own_values["frames"], own_values["warmup_transitions"])
