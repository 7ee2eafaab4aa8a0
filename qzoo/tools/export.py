"""`qzoo export RUN DIR`: a run's network as a self-contained model folder to share.

  qzoo export RUN DIR [--checkpoint K|latest] [--video] [--force]

DIR gets the online network's weights (model.safetensors), the run's config.json and
results.csv, model.json (what was exported), a model card (README.md, with the Hugging
Face Hub's front matter: tags, and a model-index holding the evaluation score of that
iteration), the learning curves (curves.png) and with --video one evaluation episode
(replay.mp4, as `qzoo record` makes it; pip install 'qzoo[video]'). `qzoo eval`, `play`,
`record`, `plot` and `compare` take DIR as they take the run. The folder is written
under a temporary name beside DIR and renamed into place when complete; an existing DIR
is refused unless --force, which replaces only a model folder holding nothing but what
export writes (or an empty folder).
"""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import sys

from qzoo.errors import UserError
from qzoo.files import atomic_write, held_temporary, remove_stale, unheld
from qzoo.run import checkpoint, logs
from qzoo.run.folder_files import os_errors
from qzoo.signals import deferred
from qzoo.tools import args as args_lib
from qzoo.tools import model_card, model_folder
from qzoo.tools.runs import load_run
from qzoo.version import __version__

VIDEO = "replay.mp4"
CURVES = "curves.png"
VIDEO_FRAMES = 3600  # at most a minute of Atari's 60 frames per second
FILES = {
    model_folder.MODEL: "the online Q-network's weights: its state dict, one tensor per key",
    model_folder.CONFIG: "the run's configuration (every `qzoo train` option)",
    model_folder.RESULTS: "the run's results, one row per iteration (DQN Zoo's columns)",
    model_folder.MANIFEST: "what was exported: the iteration, agent, environment, qzoo version",
    CURVES: "learning curves drawn from results.csv (`qzoo plot`)",
    VIDEO: "one evaluation episode (`qzoo record`)",
    "README.md": "this model card",
}


USAGE = __doc__.split("\n\n")[1].strip()
DESCRIPTION = __doc__.split("\n\n", 2)[2].strip()


def parser(prog="qzoo export", usage=USAGE, description=DESCRIPTION):
    """The options export and push share (cli/parser.py's Parser: one-line errors)."""
    from qzoo.cli.parser import Parser

    p = Parser(prog=prog, usage=usage, description=description)
    p.add_argument("run", nargs="?", metavar="RUN", help="a run folder qzoo train wrote")
    p.add_argument(
        "--checkpoint",
        default="latest",
        metavar="K|latest",
        help="the network: latest, or iteration K's (kept by --snapshot-interval)",
    )
    p.add_argument("--video", action="store_true",
                   help=f"also record one evaluation episode ({VIDEO}; needs qzoo[video])")  # fmt: skip
    return p


def main(argv):
    """`qzoo export` (see the module docstring)."""
    from qzoo.cli.parser import parse

    p = parser()
    p.add_argument("dir", nargs="?", metavar="DIR", help="the model folder to write")
    p.add_argument("--force", action="store_true", help="replace DIR if it is a model folder")
    options = parse(p, argv)
    if options["run"] is None or options["dir"] is None:
        raise UserError("qzoo export needs a run folder and a new folder: qzoo export RUN DIR")
    iteration = checkpoint_option(options["checkpoint"])
    try:
        summary = export(options["run"], options["dir"], iteration, options["video"],
                         options["force"])  # fmt: skip
    except KeyboardInterrupt:
        print(f"qzoo: interrupted; {options['dir']} was not written", file=sys.stderr)
        raise
    print(summary)


def checkpoint_option(text):
    """--checkpoint's value: None for latest, else the iteration."""
    snapshot = args_lib.Snapshot()
    try:
        value = snapshot.parse(text)
    except (ValueError, UserError):
        value = None
    if value is None or not snapshot.accepts(value):
        raise UserError(f"--checkpoint: bad value {text}; expected {snapshot.expected}")
    return None if value == "latest" else value


def check_target(run_dir, out_dir, force):
    """Refuses, before any work, a DIR that exists (without --force), that is the run or
    holds it, or that --force would replace though qzoo export did not write it."""
    out, run = os.path.realpath(out_dir), os.path.realpath(run_dir)
    if out == run or run.startswith(out.rstrip(os.sep) + os.sep):
        raise UserError(
            f"{out_dir!r}: bad value; it is or holds the run {run_dir!r}: pass a new DIR"
        )
    if not os.path.lexists(out_dir):
        return
    if not force:
        raise UserError(f"{out_dir!r} exists; pass --force to replace it, or a new DIR")
    if not os.path.isdir(out_dir) or os.path.islink(out_dir):
        raise UserError(f"{out_dir!r} is not a folder; --force replaces only a model folder")
    with os_errors("read", out_dir):
        empty = not os.listdir(out_dir)
    if not (empty or model_folder.is_model_folder(out_dir)):
        raise UserError(
            f"{out_dir!r} is not a model folder qzoo export wrote; --force replaces only "
            "those: pass a new DIR"
        )
    with os_errors("read", out_dir):
        foreign = sorted(set(os.listdir(out_dir)) - set(FILES))
    if foreign:  # a user's notes beside the model: --force would delete them
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(
            f"{out_dir!r} holds files qzoo export did not write ({listed}), which --force "
            "would delete: move them away, or pass a new DIR"
        )


def export(run_dir, out_dir, iteration=None, video=False, force=False, repo_id=None):
    """Writes the model folder `out_dir` from the run in `run_dir` (its latest network,
    or that of `iteration`); returns a one-line summary. `repo_id`: the Hub repository
    the card's commands name (qzoo push)."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    name = os.path.basename(os.path.abspath(out_dir))
    with os_errors("write", out_dir):
        if os.path.isdir(parent):
            clear_leftovers(parent, name, out_dir)  # first: it may put a model folder back
    check_target(run_dir, out_dir, force)
    if video:
        from qzoo.tools.record import _imageio

        _imageio()  # a missing extra is said before any work
    run = load_run(run_dir, iteration)
    with os_errors("write", out_dir):
        os.makedirs(parent, exist_ok=True)
        tmp, held = held_temporary(parent, f".tmp-{name}-", directory=True)
    try:
        with os_errors("write", out_dir):
            files = write_folder(tmp, run, video, name, repo_id)
            os.chmod(tmp, 0o755)  # mkdtemp's folders are private; a model is not
            if os.path.lexists(out_dir):  # --force, checked above
                old, old_held = held_temporary(parent, f".tmp-{name}-old-", directory=True)
                with deferred():  # Ctrl-C never falls between the two renames
                    os.replace(out_dir, os.path.join(old, name))
                    os.replace(tmp, out_dir)
                shutil.rmtree(old, ignore_errors=True)
                os.close(old_held)
            else:
                os.replace(tmp, out_dir)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        os.close(held)
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in files)
    return (
        f"{out_dir}: iteration {run.iteration} of {run_dir} ({run.config.agent} on "
        f"{run.config.env}); {', '.join(files)}; {size / 2**20:.1f} MiB"
    )


def clear_leftovers(parent, name, out_dir):
    """What a killed export of DIR left beside it: its temporary folders go, and a
    model folder that --force had moved aside, when the kill came before the new one
    took its place, is put back."""
    for old in unheld(parent, f".tmp-{name}-old-"):
        if os.path.lexists(os.path.join(old, name)) and not os.path.lexists(out_dir):
            os.replace(os.path.join(old, name), out_dir)
    remove_stale(parent, f".tmp-{name}-")


def write_folder(folder, run, video, name, repo_id=None):
    """Writes every file of a model folder of `run` into `folder`; returns their names."""
    config = dataclasses.replace(run.config, run_dir="")  # no local path in a shared file
    weights = {k: v.detach().cpu().contiguous() for k, v in run.network.state_dict().items()}
    checkpoint.save(os.path.join(folder, model_folder.MODEL), weights)
    write_text(os.path.join(folder, model_folder.CONFIG), config.to_json() + "\n")
    logs.CsvLog(os.path.join(folder, model_folder.RESULTS)).write(run.rows)
    manifest = model_folder.manifest(run.iteration, __version__, config.agent,
                                     config.env, config.seed)  # fmt: skip
    write_text(os.path.join(folder, model_folder.MANIFEST), json.dumps(manifest, indent=2) + "\n")
    written = [model_folder.MODEL, model_folder.CONFIG, model_folder.RESULTS,
               model_folder.MANIFEST, CURVES]  # fmt: skip
    plot_curves(folder, config)
    if video:
        record_video(folder)
        written.append(VIDEO)
    files = {f: FILES[f] for f in [*written, "README.md"]}
    text = model_card.card(config, run.info, run.rows, run.iteration, files, __version__,
                           repo_id.split("/")[-1] if repo_id else name, repo_id)  # fmt: skip
    write_text(os.path.join(folder, "README.md"), text)
    return [*written, "README.md"]


def plot_curves(folder, config):
    """curves.png: `qzoo plot`'s figure of the folder's results.csv."""
    from qzoo.tools import plot, results

    runs = [results.read_results(folder)]
    label = f"{config.agent}, seed {config.seed}"
    figure, _ = plot.plot({label: runs}, plot.choose_columns(runs, None), config.env)
    results.save_figure(figure, os.path.join(folder, CURVES))


def record_video(folder):
    """replay.mp4: `qzoo record` of the folder's own network (one episode, its line
    on stdout kept out of export's)."""
    from qzoo.tools import record

    argv = [folder, "--out", os.path.join(folder, VIDEO), "--frames", str(VIDEO_FRAMES)]
    with contextlib.redirect_stdout(io.StringIO()):
        record.main(argv, say_interrupt=False)


def write_text(path, text):
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
