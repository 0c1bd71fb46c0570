"""The PNG decode rate of one core: the measurement of ``invoke validate``'s input-capacity check
(``input.capacity``) and of ``invoke bench``; one program, one parser (``parse``).

It decodes the given PNGs with ``tf.io.decode_png`` (``channels=1``, as the trainer's input pipeline does) in one
thread (TensorFlow's inter- and intra-op pools set to 1), round after round, for at least ``--seconds``, after one
untimed pass (page cache, graph tracing), and prints one line ``chexstack-decoderate: {JSON}``: ``{"decoder",
"tensorflow", "files", "pixels" (per image, the first file's), "images", "seconds", "cpu_seconds", "per_core"
(images per CPU-second of this process), "cores" (this process's CPU affinity)}``, or ``{"error": ...}`` when it
cannot measure (no TensorFlow, no file decodes).

    python facts/decoderate.py [--seconds 3] FILE.png ...
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

PREFIX = "chexstack-decoderate: "
#: the shipped sample of NIH's 1024 x 1024 PNGs, beside the checkout (its NOTICE.md names the source)
SAMPLE_1024 = Path(__file__).resolve().parents[2] / "shared" / "data" / "chestxray14" / "images-1024"
#: seconds of decoding per measurement
SECONDS = 3.0


#: at most this many of a user's own PNGs are timed (the first by name)
USER_FILES = 8


def png_size(path: str | Path) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk (the 8-byte signature, then IHDR first: PNG spec, section 5.2-5.3),
    or None for a file that does not start as a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def sample_paths(folder: str | Path | None = None, limit: int = USER_FILES) -> list[str]:
    """The PNGs to time: up to ``limit`` of ``folder``'s own (searched recursively, the first by path, of the
    first one's size: a rate per image means one size) when one is given, else the shipped sample's (sorted); []
    when there are none (no such folder, or no sample beside the checkout)."""
    if folder is None:
        return sorted(str(p) for p in SAMPLE_1024.glob("*.png"))
    if not Path(folder).is_dir():
        return []
    out: list[str] = []
    size = None
    for path in sorted(str(p) for p in Path(folder).rglob("*.png")):
        this = png_size(path)
        if this is None or (size is not None and this != size):
            continue
        size, out = this, out + [path]
        if len(out) == limit:
            break
    return out


def command(paths: list[str], seconds: float = SECONDS) -> list[str]:
    """The measurement's command: this program under this Python on ``paths``."""
    return [sys.executable, str(Path(__file__).resolve()), "--seconds", str(seconds), *paths]


def is_run(argv_: tuple, env: dict) -> bool:
    """A recorded run of the measurement under any Python and checkout (a bundle from another node)."""
    return any(str(a).endswith("decoderate.py") for a in argv_)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(paths: list[str], seconds: float) -> dict:
    """The result ``parse`` reads (see the module's docstring)."""
    try:
        import tensorflow as tf
    except ImportError as e:
        return {"error": "TensorFlow is not importable here (%s): the trainer's decoder cannot be timed" % e}
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    contents = [tf.io.read_file(p) for p in paths]
    decode = tf.function(lambda c: tf.shape(tf.io.decode_png(c, channels=1)))
    try:
        shapes = [decode(c).numpy() for c in contents]  # untimed
    except tf.errors.OpError as e:
        return {"error": "decode failed: %s" % (e.message or e).splitlines()[0]}
    images, wall, cpu = 0, time.perf_counter(), _cpu()
    while time.perf_counter() - wall < seconds:
        for c in contents:
            decode(c)
        images += len(contents)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return {"decoder": "tf.io.decode_png channels=1", "tensorflow": tf.__version__, "files": len(paths),
            "pixels": int(shapes[0][0] * shapes[0][1]), "images": images, "seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 3), "per_core": round(images / max(cpu, 1e-9), 1),
            "cores": len(os.sched_getaffinity(0))}


def parse(text: str) -> dict | None:
    """The result of the last ``chexstack-decoderate:`` line of ``text``, or None when there is none."""
    for line in reversed(text.splitlines()):
        if line.startswith(PREFIX):
            try:
                value = json.loads(line[len(PREFIX):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    print(PREFIX + json.dumps(measure(args.files, args.seconds), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
