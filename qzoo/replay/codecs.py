"""The codecs of compressed replay (--replay-compression lz4|zstd): their packages,
one compressor and decompressor each (not shared between threads: a zstandard
decompressor shared by two threads corrupts data), and lz4 decoding straight into
place."""

from qzoo.configuration.rules.compression import require


class Codec:
    """compress(buffer) -> bytes and decompress(buffer, size) -> bytes for one codec.
    zstd at level 1 (higher levels save little more and encode slower);
    lz4's block format, without the size header (the storage knows each size). Like
    the storage, not for several threads at once: a zstandard decompressor shared by
    two threads corrupts data.

    `decode_into` (lz4 only, None where unavailable) decodes groups straight into
    memory the caller owns, by address, each only up to the bytes asked for; see
    `lz4_decode_into`."""

    def __init__(self, name):
        module = require(name)
        self.name = name
        self.decode_into = None
        if name == "zstd":
            compressor = module.ZstdCompressor(level=1, write_content_size=True)
            decompressor = module.ZstdDecompressor()
            self.compress = compressor.compress
            self.decompress = lambda data, size: decompressor.decompress(data)
        else:
            self.compress = lambda data: module.compress(data, store_size=False)
            self.decompress = lambda data, size: module.decompress(data, uncompressed_size=size)
            self.decode_into = lz4_decode_into(module)


def lz4_decode_into(block):
    """decode_into(sources, lengths, destinations, sizes): for each group, decodes the
    `length` bytes of lz4 block at address `source` into `size` bytes at address
    `destination` (a prefix of the group when `size` is less than the whole).

    lz4.block.decompress returns a new bytes object, which the storage then copies
    into place: on Pong that copy cost half as much again as the decoding itself
    (1.8 MB per batch of 32). The lz4 package's extension module exports liblz4's
    functions; LZ4_decompress_safe_partial writes into the destination directly,
    never past `size` bytes, and stops there (a batch rarely needs a whole group).
    None when the extension does not export it (then the storage uses decompress)."""
    import ctypes

    try:
        function = ctypes.CDLL(block._block.__file__).LZ4_decompress_safe_partial
    except (AttributeError, OSError):
        return None
    # (source, destination, source bytes, bytes wanted, destination capacity)
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 3
    function.restype = ctypes.c_int

    def decode_into(sources, lengths, destinations, sizes):
        for source, length, destination, size in zip(sources, lengths, destinations, sizes):
            if function(source, destination, length, size, size) != size:
                raise ValueError(f"corrupt lz4 group of {length} bytes at {source:#x}")

    return decode_into
