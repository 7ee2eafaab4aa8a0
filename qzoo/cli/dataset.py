"""`qzoo dataset info DIR [--json]` and `qzoo dataset convert SRC DST --to qzoo|dopamine`:
what a DQN Replay Dataset folder holds (offline/inspection.py), and its conversion
(offline/conversion.py) between Dopamine's files and qzoo's memory-mappable copy
(offline/layout.py); `--from rlu` reads RL Unplugged's Atari TFRecord files instead
(offline/rlu.py)."""

import contextlib
import json
import os
import shutil

from qzoo.cli.parser import Parser, parse
from qzoo.errors import UserError
from qzoo.offline.conversion import from_rlu, to_dopamine, to_qzoo
from qzoo.offline.inspection import info
from qzoo.run.folder_files import os_errors


def main(argv):
    """`qzoo dataset info DIR [--json]` and `qzoo dataset convert SRC DST --to ...`."""
    parser = Parser(prog="qzoo dataset", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", metavar="info|convert")
    show = commands.add_parser("info", help="what a dataset folder holds")
    show.add_argument("folder")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.add_argument(
        "--stack",
        type=int,
        choices=range(1, 65),
        metavar="K",
        help="frames per state, for counting valid transitions (default: the stack the "
        "files were logged with, e.g. 1 for a MinAtar run's, told by their invalid_range and "
        "padding rows; 4, Dopamine's, when they cannot tell)",
    )
    convert = commands.add_parser("convert", help="between Dopamine's files and qzoo's")
    convert.add_argument("src")
    convert.add_argument("dst")
    convert.add_argument("--to", choices=("qzoo", "dopamine"),
                         help="qzoo: Dopamine's files (or --from rlu's) into the memory-mappable "
                         "layout; dopamine: the layout (or --from rlu's) into Dopamine's files "
                         "(required without --from)")  # fmt: skip
    convert.add_argument("--from", dest="source", choices=("rlu",),
                         help="rlu: RL Unplugged's Atari TFRecord files of one run (a folder, a "
                         "file, or a prefix such as Pong/run_1), read without TensorFlow; "
                         "--to qzoo by default")  # fmt: skip
    convert.add_argument("--workers", type=int, choices=range(1, 257), metavar="N",
                         help="with --from rlu: processes decoding the PNG frames (default: "
                         "the usable cores less one, at most 8; 1 for files under 32 MB)")  # fmt: skip
    options = parse(parser, argv)
    if options.get("command") is None:
        raise UserError("dataset needs a command; expected info or convert")
    if options["command"] == "info":
        report = info(options["folder"], options["stack"])
        if options["json"]:
            print(json.dumps(report))
            return
        stack_from = {"files": "as logged", "option": "--stack",
                      "default": "Dopamine's; the files do not tell"}[report["stack_from"]]  # fmt: skip
        print(f"{report['folder']} ({report['game'] or 'game unknown'}): "
              f"{len(report['checkpoints'])} checkpoints, {report['transitions']:,} "
              f"transitions (frame stack {report['stack']}, {stack_from}), "
              f"{report['bytes'] / 2**30:.2f} GiB")  # fmt: skip
        for row in report["checkpoints"]:
            ret = row["mean_clipped_return"]
            print(f"  ckpt {row['checkpoint']:>3}: add_count {row['add_count']:>10,}  "
                  f"transitions {row['transitions']:>9,}  episodes {row['episodes_ended']:>6,}  "
                  f"mean clipped return {'n/a' if ret is None else f'{ret:.2f}'}")  # fmt: skip
    else:
        dst = options["dst"]
        if options["to"] is None and options["source"] is None:
            raise UserError("convert needs --to qzoo or --to dopamine (or --from rlu)")
        if options["workers"] is not None and options["source"] != "rlu":
            raise UserError("convert --workers: only with --from rlu (decoding its frames)")
        _check_empty_destination(dst)
        existed = os.path.isdir(dst)
        try:
            with os_errors("write", dst):  # a full disk, a read-only one: one line
                if options["source"] == "rlu":
                    _from_rlu(options["src"], dst, options["to"] or "qzoo", options["workers"])
                else:
                    (to_qzoo if options["to"] == "qzoo" else to_dopamine)(options["src"], dst)
        except BaseException:  # a file corrupt inside (CRC), a full disk, Ctrl-C
            with contextlib.suppress(OSError):
                for name in os.listdir(dst) if os.path.isdir(dst) else ():  # it was empty
                    path = os.path.join(dst, name)
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
                if not existed and os.path.isdir(dst):
                    os.rmdir(dst)  # the folder this command made
            raise


def _from_rlu(src, dst, to, workers):
    """RL Unplugged's files into the qzoo layout in `dst`, or with `to` dopamine through
    a staging copy in it, removed after."""
    if to == "qzoo":
        from_rlu(src, dst, workers)
        return
    staging = os.path.join(dst, ".rlu-staging")
    from_rlu(src, staging, workers)
    to_dopamine(staging, dst)
    shutil.rmtree(staging)


def _check_empty_destination(dst):
    """A conversion writes into a new or empty folder: into a dataset it would replace
    some checkpoints and leave the others beside them, one dataset of two."""
    try:
        names = os.listdir(dst)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise UserError(f"convert: {dst} is a file; expected a new or empty folder") from None
    if names:
        raise UserError(
            f"convert: {dst} is not empty ({len(names)} entries, e.g. {min(names)}); "
            "expected a new or empty folder (a conversion cut short: delete it and run again)"
        )
