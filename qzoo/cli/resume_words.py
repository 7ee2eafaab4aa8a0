"""`qzoo resume`'s words for what `qzoo train` refuses: a run folder's messages name
`qzoo train`'s options (another --run-dir, the run's own options), which `qzoo resume`
does not take; and a config.json edited away from its checkpoint's would be refused as
another run's options, which the user never typed. Here both are said in a resume's
terms (cli/resume.py)."""

import os

from qzoo.errors import UserError
from qzoo.run import checkpoint
from qzoo.run import folder_files as folder
from qzoo.run.changes import RESUMABLE, differences


def check_unedited(run_dir: str, saved: dict, accept: tuple) -> None:
    """Refuses a config.json edited away from its checkpoint's config, in resume's
    words (`qzoo train` would refuse the options as another run's, options that a
    resume neither typed nor takes). Only the checkpoint's header is read."""
    ckpt = os.path.join(run_dir, folder.CHECKPOINT)
    if not os.path.exists(ckpt):
        return
    state = checkpoint.peek(ckpt)
    if not folder.holds_a_run(state) or not isinstance(state["config"], dict):
        return  # the run itself says what is wrong with the checkpoint
    edited = differences(state["config"], saved, RESUMABLE + accept)
    if edited:
        listed = ", ".join(f"{k}: {b!r} there, {a!r} in the checkpoint" for k, a, b in edited)
        length = [k for k, _, _ in edited] == ["iterations"]
        extend = f", or pass --iterations {edited[0][2]} to change the run's length"
        raise UserError(
            f"{os.path.join(run_dir, 'config.json')} was edited ({listed}); a resume runs the "
            "config in the checkpoint: undo the edit, or delete config.json to resume with the "
            "checkpoint's" + (extend if length else "")
        )


# run_folder's messages are `qzoo train`'s: they may advise another --run-dir, or the
# run's own options, which `qzoo resume` does not take (RUN names the folder; a resume
# keeps the run's options). Said for a resume: the folder is the run's, the options a
# new run's.
_NEW_RUN = "a new run (`qzoo train`) may use"
FOR_RESUME = (
    ("try a lower --learning-rate or a gradient clip, in another --run-dir",
     f"{_NEW_RUN} a lower --learning-rate or a gradient clip"),
    (("free some space, lower --replay-capacity, pass --no-checkpoint-replay, or use another "
     "--run-dir"), f"free some space; {_NEW_RUN} a lower --replay-capacity or --no-checkpoint-replay"),
    ("lower --replay-capacity or --batch-size",
     f"free some memory; {_NEW_RUN} a lower --replay-capacity or --batch-size"),
    ("is available; lower --replay-capacity",
     f"is available: free some memory; {_NEW_RUN} a lower --replay-capacity"),
    (", or pass another --run-dir", ""),
    (", or use another --run-dir", ""),
    (" or use another --run-dir", ""),
    (", or another --run-dir", ""),
    ("; pass a new or empty --run-dir", ""),
)  # fmt: skip


def for_resume(message: str) -> str:
    """A run folder's message (UserError, Diverged) in a resume's words: FOR_RESUME."""
    for train_words, resume_words in FOR_RESUME:
        message = message.replace(train_words, resume_words)
    if message.startswith("--replay-capacity ") and ": the run needs" in message:
        message = message.partition(": ")[2]  # check_peak_memory's, of the run's value
    return message
