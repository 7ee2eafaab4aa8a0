"""TFRecord files read without TensorFlow, every record's checksums checked.

A TFRecord file is a sequence of records, each framed as

  length        uint64, little-endian
  length_crc    uint32, masked CRC32C of the 8 length bytes
  data          `length` bytes (here a serialized tf.train.Example)
  data_crc      uint32, masked CRC32C of the data

where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32), TensorFlow's
`crc32c::Mask`. RL Unplugged's files are the whole stream gzip-compressed (read by
TensorFlow with compression_type="GZIP"); a file starting with gzip's magic bytes is
read through gzip, any other as plain TFRecord. A record whose checksum fails, or a
file that ends inside a record, is refused in one line naming the file and the record:
a download cut short or damaged would otherwise become wrong frames in silence."""

import functools
import gzip
import struct
import zlib
from collections.abc import Iterator

from qzoo.errors import UserError

_MASK_DELTA = 0xA282EAD8
_GZIP_MAGIC = b"\x1f\x8b"


@functools.cache
def _crc32c():
    """google-crc32c's `value` (C, hardware CRC32C where the CPU has it)."""
    try:
        import google_crc32c
    except ImportError:
        raise UserError(
            "reading TFRecord files needs the google-crc32c package; install it with "
            "pip install 'qzoo[rlu]'"
        ) from None
    return google_crc32c.value


def masked_crc(data: bytes) -> int:
    """TensorFlow's masked CRC32C of `data`."""
    crc = _crc32c()(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _bad(path, problem):
    return UserError(f"{path}: {problem}; expected a TFRecord file (download it again)")


def records(path: str) -> Iterator[bytes]:
    """The records of the TFRecord file `path` (gzip-compressed or not), in order, each
    checked against its two masked CRC32Cs."""
    _crc32c()  # refused before the file is opened when the package is missing
    masked = masked_crc
    try:
        with open(path, "rb") as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
        with gzip.open(path, "rb") if compressed else open(path, "rb") as stream:
            index, offset = 0, 0
            while True:
                head = stream.read(12)
                if not head:
                    return
                if len(head) < 12:
                    raise _bad(path, f"ends inside the header of record {index} "
                                     f"(byte {offset:,}): truncated")  # fmt: skip
                length_bytes, (length_crc,) = head[:8], struct.unpack("<I", head[8:])
                if masked(length_bytes) != length_crc:
                    raise _bad(path, f"record {index} (byte {offset:,}): the CRC32C of its "
                                     "length does not match")  # fmt: skip
                (length,) = struct.unpack("<Q", length_bytes)
                data = stream.read(length)
                tail = stream.read(4)
                if len(data) < length or len(tail) < 4:
                    raise _bad(path, f"ends inside record {index} (byte {offset:,}, "
                                     f"{length:,} bytes long): truncated")  # fmt: skip
                (data_crc,) = struct.unpack("<I", tail)
                if masked(data) != data_crc:
                    raise _bad(path, f"record {index} (byte {offset:,}): the CRC32C of its "
                                     f"{length:,} data bytes does not match "
                                     f"(stored {data_crc:#010x}, computed "
                                     f"{masked(data):#010x})")  # fmt: skip
                yield data
                index, offset = index + 1, offset + 16 + length
    except EOFError:
        raise _bad(path, "its gzip stream ends early (truncated)") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise _bad(path, f"is not readable gzip ({e})") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror or e}") from None
