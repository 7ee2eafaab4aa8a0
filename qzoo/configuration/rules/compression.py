"""What --replay-compression needs: its codec's package (replay/codecs.py uses it)."""

import importlib

from qzoo.errors import UserError

# codec name -> (module, the pip package that provides it)
CODECS = {"zstd": ("zstandard", "zstandard"), "lz4": ("lz4.block", "lz4")}


def require(codec):
    """The codec's module; UserError naming the `pip install` to run when it is missing."""
    module, package = CODECS[codec]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f"--replay-compression {codec} needs the {package} package: "
            f"pip install 'qzoo[compression]' (or pip install {package})"
        ) from None
