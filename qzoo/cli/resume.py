"""`qzoo resume RUN [--option value ...]`: resumes the run in folder RUN with the options
its config.json holds (the checkpoint's config where config.json was deleted), so that
nobody has to retype the command that started it. Options given after RUN change what a
resume may change: how it runs (--device, --threads, --progress, ...; changes.RESUMABLE)
and, saying so by giving it, the run's length (--iterations; changes.ACCEPTABLE); any
other option is refused, as it would make another run."""

import json
import os

import qzoo.configuration as config_lib
from qzoo.cli.parser import Parser, add_options, parse
from qzoo.cli.resume_words import check_unedited, for_resume
from qzoo.configuration import build_config
from qzoo.configuration.values import Bool
from qzoo.errors import UserError, flag
from qzoo.run import checkpoint
from qzoo.run import folder_files as folder
from qzoo.run.changes import ACCEPTABLE, RESUMABLE, parse_accept

# The options `qzoo resume` takes after RUN: what a resume may change.
OPTIONS = tuple(n for n in RESUMABLE if n not in ("run_dir", "accept_changes")) + tuple(ACCEPTABLE)


class _RunsValue:
    """The default --help shows: the value in the run's config."""

    def __str__(self):
        return "the run's"


def resume_parser() -> Parser:
    parser = Parser(
        prog="qzoo resume",
        usage="qzoo resume RUN [--option value ...]",
        description="Resumes the run in folder RUN with the options in its config.json.\n"
        "Options after RUN may change how it runs, or extend it (--iterations N, more\n"
        "than it has: epsilon's decay and beta's annealing follow the new length).",
    )
    parser.add_argument("run", nargs="?", metavar="RUN", help="the run folder")
    fields = [config_lib.FIELDS[name] for name in OPTIONS]
    add_options(parser, fields, dict.fromkeys(OPTIONS, _RunsValue()), title="resume")
    return parser


def refused_options() -> dict[str, str]:
    """{--option: why} for the options `qzoo resume` refuses."""
    why = (
        "a resume keeps the run's options; it takes "
        + ", ".join(flag(n) for n in OPTIONS)
        + " (to change others, start another run)"
    )
    refused = {}
    for name, field in config_lib.FIELDS.items():
        if name not in OPTIONS and name != "agent":
            refused[flag(name)] = why
            if isinstance(field.metadata["domain"], Bool):
                refused[flag("no_" + name)] = why
    refused["--run-dir"] = "RUN names the run folder"
    return refused


def saved_config(run_dir: str) -> tuple[dict, str]:
    """The config dict the run in `run_dir` saved: config.json's, else (deleted) the
    checkpoint's. UserError, one line, for anything else."""
    if not os.path.isdir(run_dir):
        what = "is not a folder" if os.path.exists(run_dir) else "does not exist"
        raise UserError(f"run folder {run_dir} {what}; expected a folder `qzoo train` wrote")
    path = os.path.join(run_dir, "config.json")
    ckpt = os.path.join(run_dir, folder.CHECKPOINT)
    if folder.is_model_folder(run_dir):
        raise UserError(f"{run_dir} is a model folder (`qzoo export` wrote it), not a run "
                        "folder; resume the run it was exported from")  # fmt: skip
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        if not os.path.exists(ckpt):
            raise UserError(
                f"{run_dir} holds no qzoo run (no config.json and no {folder.CHECKPOINT}); "
                "expected a folder `qzoo train` wrote"
            ) from None
        state = checkpoint.peek(ckpt)  # its header: the arrays are read by the run
        if not folder.holds_a_run(state):
            raise UserError(f"checkpoint {ckpt} does not hold a qzoo run") from None
        return state["config"], f"checkpoint {ckpt}"
    except OSError as e:
        raise UserError(folder.os_message("read", path, e)) from None
    hint = (
        "; delete it to resume from the checkpoint's config"
        if os.path.exists(ckpt)
        else "; there is no checkpoint either: start the run again with `qzoo train`"
    )
    try:
        saved = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise UserError(f"{path} is damaged ({folder.first_line(e)}){hint}") from None
    unknown = sorted(set(saved) - set(config_lib.FIELDS)) if isinstance(saved, dict) else []
    if not isinstance(saved, dict) or not {"agent", "env"} <= set(saved) or unknown:
        raise UserError(
            f"{path} is not a qzoo config"
            + (f" (unknown keys: {', '.join(unknown[:5])})" if unknown else "")
            + hint
        )
    return saved, path


def resume_config(argv: list[str]) -> config_lib.Config:
    """The Config `qzoo resume` runs: the saved one, with the options given."""
    options = parse(resume_parser(), argv, refused_options())
    run_dir = options.pop("run", None)
    if run_dir is None:
        raise UserError("resume needs a run folder: qzoo resume RUN [--option value ...]")
    return config_for(run_dir, options)


def config_for(run_dir: str, options: dict) -> config_lib.Config:
    """The Config that resumes the run in `run_dir` with `options` (names in OPTIONS,
    values as text or typed): qzoo resume's and qzoo.resume's."""
    saved, where = saved_config(run_dir)
    values = {k: v for k, v in saved.items() if k != "agent"}
    try:
        config_lib.check_agent(saved["agent"])
        build_config(saved["agent"], values)
        accept = parse_accept(saved.get("accept_changes", ""))
    except UserError as e:
        raise UserError(f"{where} holds a config this qzoo refuses: {e}") from None
    accept += tuple(n for n in ACCEPTABLE if n in options and n not in accept)
    if where == os.path.join(run_dir, "config.json"):
        check_unedited(run_dir, saved, accept)  # resume_words.py
    values |= options | {"run_dir": run_dir, "accept_changes": ",".join(accept)}
    return build_config(saved["agent"], values)


def resume_command(argv: list[str]) -> None:
    """`qzoo resume RUN [options]`: build the run's config, then train as `qzoo train`."""
    from qzoo.errors import Diverged
    from qzoo.run import training

    try:
        config = resume_config(argv)
        training.train(config)
    except (UserError, Diverged) as e:
        raise type(e)(for_resume(str(e))) from None
