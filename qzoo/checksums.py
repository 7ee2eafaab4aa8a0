"""Checksums of arrays on disk: CRC-32 (zlib's), computed over the bytes as they are
streamed out and again as they are read back, so that flipped bytes inside an array
(which no header check sees) are found before anything trains on them.

CRC-32 is what gzip and zip use; zlib's is fast (GB/s) and needs no memory beyond the
chunk being written or read. A checksum is kept as 8 lower-case hex digits, so a file
header can hold a placeholder of the same width while the data are being written."""

import json
import zlib

import numpy as np

CHUNK_BYTES = 8 * 2**20  # bytes checked at a time when an array is read back whole
PLACEHOLDER = "0" * 8


class Crc32:
    """A running CRC-32 over the chunks given to `update`, in order."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, chunk) -> None:
        self.value = zlib.crc32(chunk, self.value)

    def hex(self) -> str:
        return f"{self.value:08x}"


def of_array(array: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> str:
    """The CRC-32 of `array`'s bytes in row-major order, as hex, read in chunks (a memory
    map is read through without copying it; a strided array a few rows at a time)."""
    crc = Crc32()
    array = np.asarray(array)
    if array.flags.c_contiguous:
        flat = array.reshape(-1).view(np.uint8)
        for i in range(0, flat.size, chunk_bytes):
            crc.update(flat[i : i + chunk_bytes])
    elif array.ndim:
        rows = max(1, chunk_bytes // max(1, array.itemsize * int(np.prod(array.shape[1:]))))
        for i in range(0, len(array), rows):
            crc.update(np.ascontiguousarray(array[i : i + rows]).reshape(-1).view(np.uint8))
    return crc.hex()


def is_checksum(value) -> bool:
    """Whether `value` is a checksum as written here (8 hex digits)."""
    return (
        isinstance(value, str) and len(value) == 8 and all(c in "0123456789abcdef" for c in value)
    )


def parse(text, names) -> dict | None:
    """{name: checksum} from the JSON `text`, or None unless it gives one checksum to
    each of `names` and nothing else."""
    try:
        crcs = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(crcs, dict) or set(crcs) != set(names):
        return None
    return crcs if all(is_checksum(v) for v in crcs.values()) else None


def mismatch(where: str, array: str, expected: str, found: str) -> str:
    """The one line that says a file is damaged, naming the file and the array."""
    return (
        f"{where} is damaged: array {array!r} does not match its checksum (crc32 {found}, "
        f"written {expected}): its bytes changed on disk or in a copy"
    )
