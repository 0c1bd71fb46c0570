"""Every image the trainer cannot decode is named in skipped-images.csv with its reason, counted in metrics.json and
left out of the counts; too many stop the run (issue 15). The inputs are one real sample PNG corrupted in each way
a copy or a disk breaks one."""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import struct
import zlib

import numpy as np
import pytest

from tests.lib.paths import SAMPLE
from tests.lib.runs import FAST_MODEL
from trainer import data, decodecheck, outputs
from trainer.errors import TrainerError

IMAGES = SAMPLE / "images-64"
LABEL_FILE = SAMPLE / "Data_Entry_2017_v2020.csv.gz"
N = 40


def _chunk(raw: bytes, kind: bytes) -> tuple[int, int]:
    """(offset, data length) of the first ``kind`` chunk (PNG spec §5.3: length, type, data, CRC)."""
    pos = 8
    while pos < len(raw):
        length, name = struct.unpack(">I4s", raw[pos:pos + 8])
        if name == kind:
            return pos, length
        pos += 12 + length
    raise AssertionError(kind)


def _with_crc(raw: bytearray, pos: int, length: int) -> bytes:
    raw[pos + 8 + length:pos + 12 + length] = struct.pack(">I", zlib.crc32(bytes(raw[pos + 4:pos + 8 + length])))
    return bytes(raw)


def corrupted(raw: bytes) -> dict[str, bytes]:
    """``raw`` (a complete 8-bit gray PNG) broken in each way: kind -> bytes."""
    ihdr, _ = _chunk(raw, b"IHDR")
    idat, n = _chunk(raw, b"IDAT")
    bad_crc = bytearray(raw)
    bad_crc[idat + 8 + n] ^= 0xFF  # the IDAT chunk's CRC
    bad_ihdr_crc = bytearray(raw)
    bad_ihdr_crc[ihdr + 21] ^= 0xFF
    bad_idat = bytearray(raw)
    bad_idat[idat + 18:idat + 218] = bytes(b ^ 0x5A for b in bad_idat[idat + 18:idat + 218])
    depth_16, depth_7 = bytearray(raw), bytearray(raw)
    depth_16[ihdr + 16] = 16  # valid for gray, but the data holds 8-bit rows
    depth_7[ihdr + 16] = 7  # no such bit depth
    return {"empty": b"", "truncated": raw[:len(raw) // 2], "not a PNG": b"<html>404 Not Found</html>\n" * 20,
            "bad IDAT CRC": bytes(bad_crc), "bad IHDR CRC": bytes(bad_ihdr_crc),
            "bad IDAT data": _with_crc(bad_idat, idat, n), "bit depth 16": _with_crc(depth_16, ihdr, 13),
            "bit depth 7": _with_crc(depth_7, ihdr, 13)}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """``N`` sample images and the label file; the first 8 replaced by the corruptions. -> (folder, {kind: name})"""
    root = tmp_path_factory.mktemp("bad-images")
    names = sorted(os.listdir(IMAGES))[:N]
    for name in names:
        shutil.copy(IMAGES / name, root / name)
    shutil.copy(LABEL_FILE, root / LABEL_FILE.name)
    kinds = corrupted((IMAGES / names[0]).read_bytes())
    by_kind = dict(zip(kinds, names))
    for kind, name in by_kind.items():
        (root / name).write_bytes(kinds[kind])
    return root, by_kind


def _options(root, **kw):
    base = dict(data=str(root), images=None, labels=None, train_val_list=None, test_list=None, seed=0,
                val_fraction=0.2, test_fraction=0.0, max_bad_images=0.5)
    base.update(kw)
    return argparse.Namespace(**base)


def _listed(path) -> dict[str, str]:
    with open(path, newline="") as f:
        return {os.path.basename(r["path"]): r["reason"] for r in csv.DictReader(f)}


def test_every_corrupt_image_is_named_counted_and_left_out(broken, tmp_path, capsys):
    root, by_kind = broken
    listed = tmp_path / "skipped-images.csv"
    d = data.load(_options(root), skipped_list=str(listed), decode_check=decodecheck.find_failures)
    reasons = _listed(listed)
    assert set(reasons) == set(by_kind.values())
    why = {kind: reasons[name] for kind, name in by_kind.items()}
    assert why["empty"] == "empty file" and why["truncated"].startswith("truncated")
    assert why["not a PNG"] == "not a PNG (no PNG signature)"
    assert why["bad IHDR CRC"] == "bad PNG header: IHDR CRC mismatch"
    assert why["bit depth 7"].startswith("bad PNG header: 64x64, bit depth 7")
    for kind in ("bad IDAT CRC", "bad IDAT data", "bit depth 16"):  # complete files: only a decode finds them
        assert why[kind].startswith("failed to decode: ") and "function_node" not in why[kind], why[kind]
    assert d.report["images_skipped"] == {"png_check": 5, "decode": 3, "total": 8}
    assert d.report["images_used"] == N - 8 == len(d.train) + len(d.val) + len(d.test)
    assert not set(by_kind.values()) & {os.path.basename(p) for p in d.train.paths + d.val.paths}
    assert "8 image files failed the PNG check or the decode and are skipped" in capsys.readouterr().err


def test_more_bad_images_than_allowed_stop_the_run_and_the_list_is_kept(broken, tmp_path):
    root, by_kind = broken
    listed = tmp_path / "skipped-images.csv"
    with pytest.raises(TrainerError) as err:
        data.load(_options(root, max_bad_images=0.1), skipped_list=str(listed),
                  decode_check=decodecheck.find_failures)
    assert str(err.value) == (
        "8 of %d images below --data %s (20.0 %%) cannot be used, more than --max-bad-images 0.1 allows: is the copy "
        "of the data complete? They are listed in %s; raise --max-bad-images to train without them"
        % (N, root, listed))
    assert len(_listed(listed)) == 8
    data.load(_options(root, max_bad_images=0.2), decode_check=decodecheck.find_failures)  # 20 %: not more


def test_ranks_share_the_decode_and_agree(broken):
    """World size 2: each rank decodes every second image; the gathered verdicts are the same on both."""
    root, by_kind = broken
    paths = sorted(str(p) for p in root.glob("*.png"))
    masks = []
    for rank in (0, 1):
        mask = np.zeros(len(paths), dtype=np.int8)
        mask[decodecheck._undecodable(paths, list(range(rank, len(paths), 2)))] = 1
        masks.append(mask)
    gather = lambda mask, name: np.concatenate(masks)  # noqa: E731  (what hvd.allgather returns on each rank)
    found = [decodecheck.find_failures(paths, rank, 2, gather) for rank in (0, 1)]
    assert set(found[0]) == set(found[1]) == {paths.index(str(root / n)) for n in by_kind.values()}
    assert found[1][min(found[1])] == "failed to decode (tf.image.decode_png)"  # reasons: rank 0 writes the list


def test_an_image_failing_in_an_evaluation_is_added_to_the_list(tmp_path):
    listed = str(tmp_path / outputs.SKIPPED_IMAGES)
    outputs.write_skipped_images(listed, [{"path": "/d/a.png", "reason": "empty file"}])
    outputs.add_skipped_images(listed, [{"path": "/d/b.png", "reason": "failed to decode in the evaluation of epoch 2"},
                                        {"path": "/d/a.png", "reason": "again"}])
    assert _listed(listed) == {"a.png": "empty file", "b.png": "failed to decode in the evaluation of epoch 2"}


def test_max_bad_images_is_a_share():
    from trainer import cli

    assert cli.parse([]).max_bad_images == cli.MAX_BAD_IMAGES == 0.01
    with pytest.raises(TrainerError, match="--max-bad-images 1.5: expected a share from 0 to 1"):
        cli.check(cli.parse(["--data", "synthetic", "--max-bad-images", "1.5"]))


@pytest.mark.slow
def test_a_training_run_names_counts_and_leaves_out_the_corrupt_images(broken, tmp_path):
    """``python -m trainer`` (world size 1) on the sample with the corrupt images: skipped-images.csv names all 8,
    metrics.json counts them, n_train + n_val are the usable images only."""
    import json
    import subprocess
    import sys

    from tests.lib.paths import REPO

    root, by_kind = broken
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "trainer", "--data", str(root), *FAST_MODEL,
                          "--image-size", "32", "--batch-size", "8", "--epochs", "1", "--val-fraction", "0.3",
                          "--test-fraction", "0", "--max-bad-images", "0.25", "--output", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert set(_listed(out / outputs.SKIPPED_IMAGES)) == set(by_kind.values())
    metrics = json.loads((out / outputs.METRICS).read_text())
    assert metrics["run"]["data"]["images_skipped"] == {"png_check": 5, "decode": 3, "total": 8}
    epoch = metrics["epochs"][-1]
    assert epoch["n_train"] + epoch["n_val"] == N - 8 and epoch["val_rows"]["skipped"] == []
