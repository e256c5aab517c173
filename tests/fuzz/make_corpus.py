#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/): small valid IDX files, raw and gzip,
small valid checkpoints (the format of core/checkpoint.h), and a few edge cases. The files are
committed; run this again only to change them. Deterministic: the same bytes every run."""
import gzip
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(kind, name, data):
    os.makedirs(os.path.join(HERE, "corpus", kind), exist_ok=True)
    with open(os.path.join(HERE, "corpus", kind, name), "wb") as f:
        f.write(data)


def idx(dims, data, type_byte=0x08):
    return bytes([0, 0, type_byte, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def idx_seeds():
    labels = idx([10], bytes(range(10)))
    images = idx([3, 4, 4], bytes((7 * i) % 256 for i in range(48)))
    rows = idx([2, 5], bytes(range(10)))
    write("idx", "labels-raw", labels)
    write("idx", "labels.gz", gz(labels))
    write("idx", "images-raw", images)
    write("idx", "images.gz", gz(images))
    write("idx", "rows-2d-raw", rows)
    write("idx", "two-gzip-members.gz", gz(images[:20]) + gz(images[20:]))
    write("idx", "truncated.gz", gz(images)[:-9])
    write("idx", "trailing-byte-raw", labels + b"\x00")
    write("idx", "float-type-raw", idx([2], struct.pack(">2f", 1.0, 2.0), type_byte=0x0D))
    write("idx", "claims-2gib-raw", idx([65536, 32768, 1], b"\x01" * 16))
    write("idx", "empty", b"")


def checkpoint(widths, adam, step, epochs, seed, version=2, schedule=(2, 10, 100, 0.3)):
    layers = len(widths) - 1
    count = sum(widths[l] * widths[l + 1] + widths[l + 1] for l in range(layers))
    arrays = 2 if adam else 1
    floats = [((seed * 7919 + i) % 2001 - 1000) / 997.0 for i in range(count * (1 + arrays))]
    body = b"MLPCKPT\0" + struct.pack("<II", version, layers)
    body += struct.pack("<%dI" % len(widths), *widths)
    body += struct.pack("<IIII", 1 if adam else 0, step, epochs, arrays)
    if version >= 2:  # the learning-rate schedule: kind, warm-up, updates, lr
        body += struct.pack("<IIIf", *schedule)
    body += struct.pack("<2f", 1 / 255.0, -0.13)
    body += struct.pack("<%df" % len(floats), *floats)
    return body + struct.pack("<I", zlib.crc32(body))


def checkpoint_seeds():
    sgd = checkpoint([7, 5, 3], adam=False, step=12, epochs=2, seed=1)
    write("checkpoint", "sgd-7-5-3", sgd)
    write("checkpoint", "adam-6-4-3-2", checkpoint([6, 4, 3, 2], adam=True, step=40, epochs=5, seed=2))
    write("checkpoint", "sgd-no-hidden-4-2", checkpoint([4, 2], adam=False, step=0, epochs=0, seed=3))
    write("checkpoint", "sgd-truncated", sgd[: len(sgd) // 2])
    write("checkpoint", "sgd-bad-checksum", sgd[:-1] + bytes([sgd[-1] ^ 1]))
    write("checkpoint", "version-1", checkpoint([7, 5, 3], adam=False, step=12, epochs=2, seed=1, version=1))
    write("checkpoint", "version-3", sgd[:8] + struct.pack("<I", 3) + sgd[12:])
    write("checkpoint", "empty", b"")


if __name__ == "__main__":
    idx_seeds()
    checkpoint_seeds()
