"""`qzoo push RUN --repo-id USER/NAME`: exports a run and uploads it to the Hugging Face Hub.

  qzoo push RUN --repo-id USER/NAME [--checkpoint K|latest] [--video] [--private]
                [--commit-message TEXT]

The model folder `qzoo export` writes (weights, config, results, model card, curves,
with --video a replay) is made in a temporary folder and uploaded as the Hub's
convention goes (CleanRL's and rl-baselines3-zoo's): the model repository is created if
it does not exist (HfApi.create_repo, exist_ok), then the folder is uploaded as one
commit (HfApi.upload_folder). The token is huggingface_hub's: HF_TOKEN, or `hf auth
login`. Needs pip install 'qzoo[hub]'.
"""

import os
import re
import tempfile

from qzoo.errors import UserError
from qzoo.tools import export as export_lib

# The Hub's repository names: letters, digits, '-', '_' and '.', at most 96 characters,
# not starting or ending with '-' or '.', no '--' or '..'.
NAME = r"(?!.*(--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
REPO_ID = re.compile(rf"{NAME}/{NAME}")


def main(argv):
    """`qzoo push` (see the module docstring)."""
    from qzoo.cli.parser import parse

    usage = __doc__.split("\n\n")[1].strip()
    p = export_lib.parser("qzoo push", usage, __doc__.split("\n\n", 2)[2].strip())
    p.add_argument("--repo-id", metavar="USER/NAME", help="the Hub model repository")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--commit-message", default=None, metavar="TEXT",
                   help="the upload's commit message (default: names the run's iteration)")  # fmt: skip
    options = parse(p, argv)
    if options["run"] is None:
        raise UserError("qzoo push needs a run folder: qzoo push RUN --repo-id USER/NAME")
    repo_id = options["repo_id"]
    if repo_id is None:
        raise UserError("qzoo push needs --repo-id USER/NAME (the Hub model repository)")
    if not REPO_ID.fullmatch(repo_id):
        raise UserError(
            f"--repo-id: bad value {repo_id!r}; expected USER/NAME, each of letters, digits, "
            "'-', '_' and '.' (at most 96)"
        )
    iteration = export_lib.checkpoint_option(options["checkpoint"])
    hub = huggingface_hub()
    push(hub, options["run"], repo_id, iteration, options["video"], options["private"],
         options["commit_message"])  # fmt: skip


def huggingface_hub():
    """The huggingface_hub module; UserError naming the extra if it is not installed."""
    try:
        import huggingface_hub
    except ImportError:
        raise UserError("the Hub needs huggingface_hub; pip install 'qzoo[hub]'") from None
    return huggingface_hub


def push(hub, run_dir, repo_id, iteration=None, video=False, private=False, message=None):
    """Exports `run_dir` to a temporary folder and uploads it to the model repository
    `repo_id` with `hub` (the huggingface_hub module); prints where it went."""
    with tempfile.TemporaryDirectory(prefix="qzoo-push-") as tmp:
        folder = os.path.join(tmp, repo_id.split("/")[1])
        summary = export_lib.export(run_dir, folder, iteration, video, repo_id=repo_id)
        what = summary.split(": ", 1)[1].split(";")[0]  # "iteration K of RUN (agent on env)"
        try:
            api = hub.HfApi()
            api.create_repo(repo_id, repo_type="model", exist_ok=True, private=private)
            info = api.upload_folder(repo_id=repo_id, folder_path=folder, repo_type="model",
                                     commit_message=message or f"qzoo push: {what}")  # fmt: skip
        # The Hub client's errors come from whichever HTTP library it runs on (requests,
        # httpx, httpx2: no common base): network, HTTP and token failures, in one line.
        except Exception as e:  # noqa: BLE001
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UserError(
                f"cannot push to {repo_id}: {reason} (check the network and the token: "
                "`hf auth login` or HF_TOKEN; the run was not changed)"
            ) from None
    url = getattr(info, "commit_url", None) or f"https://huggingface.co/{repo_id}"
    print(f"{repo_id}: {what} pushed; {url}")


def download(repo_id, hub=None):
    """The local folder of the model `repo_id` that `qzoo push` uploaded to the Hub
    (huggingface_hub's cache: downloaded once), for qzoo.load; UserError, one line,
    for a name that is not a repo id, a missing extra or a failed download."""
    if not REPO_ID.fullmatch(repo_id):
        raise UserError(f"{repo_id!r} is neither a folder nor a Hub repo id (owner/name)")
    hub = hub or huggingface_hub()
    from qzoo.tools import model_folder

    files = [model_folder.MODEL, model_folder.MANIFEST, model_folder.CONFIG, model_folder.RESULTS]
    try:
        return hub.snapshot_download(repo_id, repo_type="model", allow_patterns=files)
    except Exception as e:  # noqa: BLE001  (as push: the Hub client's HTTP errors vary)
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"cannot download {repo_id} from the Hub: {reason}") from None
