"""Input capacity: can this node's cores decode PNGs as fast as its GPUs train on them?

Observed: the PNG decode rate of one core (``facts.decoderate``: the trainer's ``tf.io.decode_png``, one thread, a
few seconds) on up to 8 of the user's own PNGs (``--images DIR``), else on the shipped 1024 x 1024 ChestX-ray14
sample (``decoderate.SAMPLE_1024``: NIH's full-size PNGs, as every image of the data set is), run as a tool so that
a bundle records it (``--collect``) and replays it (``--from``); the node's cores (the program's CPU affinity) and
its GPUs (nvidia-smi, ``gpu.snapshot``: their kind, and their count unless ``--gpus N`` gives the run's). Judged:
the cores' decode bound, per-core rate × cores, against what the GPUs consume at the trainer's default 224² in full
precision, from the published per-GPU rate of their kind (``facts.gpu_rates``). The decode bound is what the
trainer's PNG pipeline costs the host when the training step resizes and augments (``--input-resize``, in the step
by default on GPUs: ``trainer.device_input``); resizing on the host costs more (bench/ratios/input_pipeline.py
measures both); a prepared copy (``invoke prepare``) reads uint8 rows and needs no decode.

PASS only on both observations: a node without a measured rate, a GPU of a kind without a published figure, or no
sample is a SKIP, never a PASS. A node without GPUs asked about ``--gpus N`` (a login or CPU node where the question
"can these cores feed N GPUs" is asked ahead of the run) has no GPU kind to judge against — a stack's image runs on
every kind, so ``--stack`` names none: the decode rate is measured all the same and the SKIP says how many GPUs of
each published kind these cores would feed, and how to get the verdict (on the GPU node, or its ``--collect``
bundle judged here with ``--from``).
"""
from __future__ import annotations

from chexstack.tools import ToolRun
from facts import decoderate, gpu_rates
from facts.gpu_rates import count_text
from validate.checks.gpu import no_gpu_reason, snapshot
from validate.checks.registry import Context, check
from validate.result import CheckResult, Reason, Status, passed, skipped, warned

CID = "input.capacity"
#: the image side the demand is judged at: the trainer's default --image-size
IMAGE_SIZE = 224
EXPECTED = "the cores decode what the GPUs train on (%d² decode bound >= N × per-GPU rate)" % IMAGE_SIZE


def _not_measured(result: dict | None, res: ToolRun | None) -> str | None:
    """Why the decode measurement ``res`` gave no rate (``result``: its parsed line), or None when it did."""
    if result is not None and "per_core" in result:
        return None
    return (result or {}).get("error") or (res.why_not() if res is not None and not res.ok else "no result line")


def judge_capacity(result: dict | None, res: ToolRun | None, gpus: int, gpu_name: str | None) -> CheckResult:
    """``result``: the decode measurement (``decoderate.parse``) of ``res``; ``gpus`` GPUs named ``gpu_name``.
    PASS when the cores' decode bound covers the GPUs' published rate, WARN (``INPUT_BOUND``) with the GPU count it
    covers when not; SKIP without a measured rate or a published figure for the kind."""
    expected = EXPECTED
    why = _not_measured(result, res)
    if why:
        return skipped(CID, "decode rate not measured: %s" % why, expected, "TOOL_FAILED")
    rate = gpu_rates.published(gpu_name or "")
    if rate is None:
        return skipped(CID, "no published training rate for %s (facts.gpu_rates has %s); the cores decode %s PNG/s "
                       "(%d × %s per core)" % (gpu_name or "this GPU", ", ".join(r.kind for r in gpu_rates.PUBLISHED),
                                               count_text(result["per_core"] * result["cores"]), result["cores"],
                                               count_text(result["per_core"])), expected, "NOT_REPORTED")
    per_gpu = rate.at(IMAGE_SIZE, amp=False)
    verdict = gpu_rates.capacity(result["per_core"], result["cores"], gpus, rate.kind, per_gpu, IMAGE_SIZE,
                                 "%s img/s each, FP32; %s with mixed precision" % (
                                     count_text(per_gpu), count_text(rate.at(IMAGE_SIZE, amp=True) * gpus)))
    details = ["per-GPU rate: %s" % rate.source, "decode: %s, TensorFlow %s, %d images of %d² in %.1f CPU-s"
               % (result["decoder"], result["tensorflow"], result["images"], int(result["pixels"] ** 0.5),
                  result["cpu_seconds"])]
    if verdict.ok:
        return passed(CID, verdict.line, expected, details)
    return warned(CID, verdict.line, expected, "prepare a copy at the training size once (invoke prepare) and "
                  "train from it (--data PREP): no PNG decode per epoch", "INPUT_BOUND", details)


#: how a node without GPUs gets the verdict: the GPU node's own run, or its bundle judged anywhere
ELSEWHERE = ("run it on the GPU node (invoke validate --only input.capacity --gpus N), or record it there (invoke "
             "validate --collect BUNDLE) and judge the bundle here (invoke validate --from BUNDLE)")


def judge_without_gpus(result: dict | None, res: ToolRun | None, gpus: int, why: str) -> CheckResult:
    """A node without GPUs (``why``) asked about ``gpus`` GPUs: no kind to judge against, so always a SKIP
    (``NOT_APPLICABLE``), never a PASS: the cores' measured decode bound (``result``, ``decoderate.parse`` of
    ``res``) and how many GPUs of each published kind it would feed, with how to get the verdict."""
    expected = EXPECTED
    not_run = _not_measured(result, res)
    if not_run:
        return CheckResult(CID, Status.SKIP, "%s, so no GPU kind to judge --gpus %d against; decode rate not "
                           "measured: %s" % (why, gpus, not_run), expected, ELSEWHERE, "NOT_APPLICABLE")
    verdicts = [gpu_rates.capacity(result["per_core"], result["cores"], gpus, rate.kind,
                                   rate.at(IMAGE_SIZE, amp=False), IMAGE_SIZE,
                                   "%s img/s each, FP32" % count_text(rate.at(IMAGE_SIZE, amp=False)))
                for rate in gpu_rates.PUBLISHED]
    feeds = " or ".join("%d %s (%s img/s each)" % (v.fed, r.kind, count_text(r.at(IMAGE_SIZE, amp=False)))
                        for v, r in zip(verdicts, gpu_rates.PUBLISHED))
    measured = ("%s, so no GPU kind to judge --gpus %d against: %d cores decode ~%s PNG/s (%s per core), they "
                "would feed %s at %d², FP32" % (why, gpus, result["cores"], count_text(result["per_core"] *
                                                                                       result["cores"]),
                                               count_text(result["per_core"]), feeds, IMAGE_SIZE))
    details = [v.line for v in verdicts] + ["per-GPU rate: %s" % gpu_rates.SOURCE]
    return CheckResult(CID, Status.SKIP, measured, expected, ELSEWHERE, "NOT_APPLICABLE", details)


def _measure(ctx: Context, paths: list[str]) -> tuple[dict | None, ToolRun]:
    res = ctx.tool(*decoderate.command(paths), timeout=120, like=decoderate.is_run)
    return (decoderate.parse(res.stdout) if res.ok else None), res


@check(CID, "the cores' PNG decode rate vs what the GPUs train on", fast=False)
def capacity(ctx: Context) -> CheckResult:
    gpuless = no_gpu_reason(ctx)
    if gpuless and not ctx.gpus:
        return skipped(CID, Reason("%s; --gpus N measures the cores against N GPUs of each kind with a published "
                                   "rate" % gpuless, gpuless.code))
    paths = decoderate.sample_paths(ctx.images)
    if not paths:
        where = ("--images %s" % ctx.images) if ctx.images else decoderate.SAMPLE_1024
        return skipped(CID, "no PNGs at %s to time the decode on (give your own: --images DIR)" % where,
                       code="NOT_APPLICABLE")
    if gpuless:
        return judge_without_gpus(*_measure(ctx, paths), ctx.gpus, gpuless)
    snap = snapshot(ctx)
    names = [g.name for g in snap.report.gpus if g.name]
    if not names:
        return skipped(CID, "nvidia-smi lists no GPU by name", code="NOT_REPORTED")
    result, res = _measure(ctx, paths)
    return judge_capacity(result, res, ctx.gpus or len(names), names[0])
