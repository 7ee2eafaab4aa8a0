"""An NPY file of uint8 frames written by appending, its row count unknown until the end.

Its header is padded to a fixed 256 bytes (NPY v1.0 allows any padding), so that the
final shape is written over the placeholder in place, and rows past the written ones
are added as zeros by extending the file (sparse where the file system allows): no
frame is copied to give a conversion's checkpoints one capacity."""

import os

import numpy as np

_HEADER = 256


def npy_header(shape: tuple) -> bytes:
    """An NPY v1.0 header of uint8 `shape`, padded to 256 bytes."""
    text = repr({"descr": "|u1", "fortran_order": False, "shape": tuple(shape)})
    text = text.ljust(_HEADER - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


class GrowingNpy:
    """Frames of `frame_shape` appended to the file `path`, then `finish`ed into an NPY
    file of a given row count."""

    def __init__(self, path: str, frame_shape: tuple):
        self.path, self.frame_shape = path, tuple(frame_shape)
        self.frame_bytes = int(np.prod(self.frame_shape))
        self.rows = 0
        self.file = open(path, "wb+")  # noqa: SIM115 (appended to until finish or close)
        self.file.write(npy_header((0,) + self.frame_shape))

    def append(self, frames: np.ndarray):
        """Appends [n, *frame_shape] uint8 frames."""
        assert frames.shape[1:] == self.frame_shape and frames.dtype == np.uint8
        self.file.write(np.ascontiguousarray(frames).tobytes())
        self.rows += len(frames)

    def reordered(self, blocks: list) -> "GrowingNpy":
        """A new file holding the row blocks (first row, rows) in the order given; this
        one deleted."""
        self.file.flush()
        source = np.memmap(self.path, np.uint8, "r", _HEADER, (self.rows,) + self.frame_shape)
        out = GrowingNpy(self.path + ".sorted", self.frame_shape)
        for first, rows in blocks:
            for begin in range(first, first + rows, 4096):
                out.append(source[begin : min(begin + 4096, first + rows)])
        del source
        self.file.close()
        os.replace(out.path, self.path)
        out.path = self.path
        return out

    def finish(self, capacity: int, final_path: str):
        """Writes the header of `capacity` rows (zero rows added past the written ones),
        makes the file durable and renames it to `final_path`."""
        if capacity < self.rows:
            raise ValueError(f"capacity {capacity} < {self.rows} rows written")
        self.file.seek(0)
        self.file.write(npy_header((capacity,) + self.frame_shape))
        self.file.truncate(_HEADER + capacity * self.frame_bytes)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.path, final_path)

    def close(self):
        self.file.close()
