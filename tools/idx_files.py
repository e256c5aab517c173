"""The IDX files MNIST comes in (raw or gzipped), read and written with the standard library
alone: the one reader of the Python tools. tools/peers/peer_common.py turns what it reads into
NumPy arrays; tools/study/study_measure.py writes subsets of MNIST with it. It imports nothing of
the project's, so either room can import it (each puts tools/ on its path).

Format: two zero bytes, the element type (0x08: unsigned byte, the only one MNIST uses), the
number of dimensions, each dimension as a big-endian 32-bit count, then the elements.
"""
import gzip
import math
import struct
from pathlib import Path

UNSIGNED_BYTE = 0x08


class IdxError(ValueError):
    """A file that is missing or is not an IDX file of unsigned bytes; the message names it."""


def find_idx(directory, name):
    """directory/name, or directory/name.gz, whichever exists; IdxError if neither does."""
    directory = Path(directory)
    for candidate in (directory / name, directory / (name + ".gz")):
        if candidate.exists():
            return candidate
    raise IdxError(f"{directory}: no {name}[.gz]")


def read_idx(path):
    """(shape, elements) of an IDX file of unsigned bytes: a tuple of counts and the bytes."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[:3] != bytes([0, 0, UNSIGNED_BYTE]):
        raise IdxError(f"{path}: not an IDX file of unsigned bytes")
    start = 4 + 4 * data[3]
    if len(data) < start:
        raise IdxError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{data[3]}I", data[4:start])
    elements = data[start:]
    if len(elements) != math.prod(shape):
        raise IdxError(f"{path}: {len(elements)} bytes of data where its shape {shape} needs {math.prod(shape)}")
    return shape, elements


def write_idx(path, shape, elements, compresslevel=1):
    """Writes a gzipped IDX file of unsigned bytes."""
    header = bytes([0, 0, UNSIGNED_BYTE, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)
    with gzip.open(path, "wb", compresslevel=compresslevel) as f:
        f.write(header + elements)

