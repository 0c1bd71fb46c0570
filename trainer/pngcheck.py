"""O(1) structural check of a PNG file, run once per image before training.

Reads 33 bytes at the start and at most 1 KiB at the end — no decode — and catches what breaks decoding most
often in practice: a file that is not a PNG (garbage, HTML error page, zero bytes), a bad IHDR chunk, or a file cut
short during a copy or download (no IEND chunk at the end). Layout from the PNG specification (W3C, 2nd ed.,
§5.2 signature, §5.3 chunk layout, §11.2.2 IHDR, §11.2.5 IEND): signature ``89 50 4E 47 0D 0A 1A 0A``, then IHDR
(length 13, width, height, bit depth, colour type, compression, filter, interlace, CRC-32), ..., and IEND
(length 0, CRC ``AE 42 60 82``) last.

Corruption inside the compressed data (IDAT), a data chunk's CRC and rows that do not match the bit depth pass this
check; ``trainer.decodecheck`` then decodes every image that passed and names those that fail.
"""
import collections
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

SIGNATURE = b"\x89PNG\r\n\x1a\n"
IEND_CHUNK = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_TAIL = 1024
_BIT_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def problem(path):
    """None if ``path`` looks like a complete PNG, else a short reason (``"truncated: ..."``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(33)
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - _TAIL))
            tail = f.read(_TAIL)
    except (IOError, OSError) as e:
        return unreadable(e)
    return _judge(head, tail, size)


def dimensions(path):
    """(height, width) in pixels of the PNG ``path`` from its IHDR chunk (the same 33 bytes ``problem`` reads), or
    None when the file does not start with a valid IHDR."""
    try:
        with open(path, "rb") as f:
            head = f.read(33)
    except (IOError, OSError):
        return None
    if len(head) < 33 or head[:8] != SIGNATURE or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return height, width


def problem_in(contents):
    """``problem`` of a file whose whole ``contents`` (bytes) were read already: None or the same reason."""
    return _judge(contents[:33], contents[-_TAIL:], len(contents))


def unreadable(error):
    """The reason for a file that could not be read (an IOError/OSError)."""
    return "unreadable: %s" % (error.strerror or error)


def _judge(head, tail, size):
    if size == 0:
        return "empty file"
    if head[:8] != SIGNATURE:
        return "not a PNG (no PNG signature)"
    if len(head) < 33:
        return "truncated: %d bytes, shorter than a PNG header" % size
    length, kind = struct.unpack(">I4s", head[8:16])
    if kind != b"IHDR" or length != 13:
        return "bad PNG header: first chunk is not a 13-byte IHDR"
    width, height, depth, colour = struct.unpack(">IIBB", head[16:26])
    if (zlib.crc32(head[12:29]) & 0xffffffff) != struct.unpack(">I", head[29:33])[0]:
        return "bad PNG header: IHDR CRC mismatch"
    if width == 0 or height == 0 or depth not in _BIT_DEPTHS.get(colour, ()):
        return "bad PNG header: %dx%d, bit depth %d, colour type %d" % (width, height, depth, colour)
    if IEND_CHUNK not in tail:
        return "truncated: no IEND chunk at the end (%d bytes)" % size
    return None


def sizes(paths, workers=8):
    """``collections.Counter`` of the (height, width) of ``paths``' PNG headers (``dimensions``; files without a
    readable header are not counted; I/O-bound: read in threads)."""
    if not paths:
        return collections.Counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return collections.Counter(d for d in pool.map(dimensions, paths, chunksize=256) if d is not None)


def find_problems(paths, workers=8):
    """``{index: reason}`` for every path in ``paths`` that fails ``problem`` (I/O-bound: checked in threads)."""
    if not paths:
        return {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        reasons = list(pool.map(problem, paths, chunksize=256))
    return dict((i, r) for i, r in enumerate(reasons) if r is not None)
