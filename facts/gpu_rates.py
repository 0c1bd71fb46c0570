"""Published training rates of one GPU, images/s: what N GPUs of a kind consume, for the input-capacity check
(``validate/checks/input_capacity.py``, ``bench.sweep.input_capacity``).

NVIDIA DeepLearningExamples, ResNet-50 v1.5 for TensorFlow, "Training performance results" (the
``training_perf.sh`` benchmark in the TensorFlow 20.06-tf1-py3 NGC container, averaged over an entire training
epoch, 224 x 224 ImageNet images, XLA on):
https://github.com/NVIDIA/DeepLearningExamples/tree/master/TensorFlow/Classification/ConvNets/resnet50v1.5#training-performance-results

- NVIDIA DGX-1 (8x V100 16G), 1 GPU: 412 img/s FP32 (batch 128), 1,270 img/s mixed precision (batch 256);
- NVIDIA DGX A100 (8x A100 40GB), 1 GPU: 909 img/s TF32, 2,375 img/s mixed precision (batch 256).

No figure of that table is given for other GPUs (H100, H200, ...): for them the check has no published rate and
says so. These are ResNet-50's rates; CheXNet's DenseNet-121 is not in that table, so they are a yardstick of
what a GPU of the kind consumes, not a DenseNet-121 measurement. At another image size the rate is scaled by the
pixel count (224² / S²), an approximation (a convolution's work per image grows with its pixels), not measured.
"""
from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("NVIDIA DeepLearningExamples, ResNet-50 v1.5 for TensorFlow, training performance, 1 GPU, "
          "TensorFlow 20.06-tf1-py3: https://github.com/NVIDIA/DeepLearningExamples/tree/master/TensorFlow/"
          "Classification/ConvNets/resnet50v1.5#training-performance-results")
#: the image side of the published rates, pixels
IMAGE_SIZE = 224


@dataclass(frozen=True)
class GpuRate:
    """One GPU's published ResNet-50 training rate at ``IMAGE_SIZE``: ``fp32`` (TF32 on A100) and ``amp`` (mixed
    precision), images/s."""

    kind: str
    fp32: float
    amp: float
    source: str = SOURCE

    def at(self, image_size: int, amp: bool) -> float:
        """images/s at ``image_size`` (scaled by the pixel count), full or mixed precision."""
        return (self.amp if amp else self.fp32) * (IMAGE_SIZE / image_size) ** 2


#: by the name nvidia-smi gives (``Tesla V100-SXM2-16GB``, ``NVIDIA A100-SXM4-40GB``): the kind it contains
PUBLISHED = (GpuRate("V100", 412, 1270), GpuRate("A100", 909, 2375))


def published(gpu_name: str) -> GpuRate | None:
    """The published rate of the GPU nvidia-smi names ``gpu_name``, or None when the table has none."""
    for rate in PUBLISHED:
        if rate.kind in gpu_name.upper():
            return rate
    return None


@dataclass(frozen=True)
class Capacity:
    """The cores' decode bound against what ``gpus`` GPUs consume: ``supply`` (images/s: ``per_core`` × ``cores``),
    ``need`` (``per_gpu`` × ``gpus``), ``fed`` (the GPUs the supply keeps busy), ``line`` (the verdict in words:
    "8 × V100 need ~3,296 img/s at 224² (...); 40 cores decode ~5,000 PNG/s: OK" or "...: input-bound beyond 6
    GPUs"), ``ok``."""

    supply: float
    need: float
    fed: int
    ok: bool
    line: str


def count_text(n: float) -> str:
    """``n`` rounded, with thousands separators: ``5,000``."""
    return "{:,.0f}".format(n)


def capacity(per_core: float, cores: int, gpus: int, kind: str, per_gpu: float, image_size: int,
             rate_note: str) -> Capacity:
    """The Capacity of ``cores`` decoding ``per_core`` PNGs/s each for ``gpus`` GPUs of ``kind`` training on
    ``per_gpu`` images/s each at ``image_size``; ``rate_note``: where ``per_gpu`` comes from, in the line's
    parenthesis ("412 img/s each, FP32; ..." or "measured here, 1 GPU")."""
    supply, need = per_core * cores, per_gpu * gpus
    fed = int(supply // per_gpu) if per_gpu > 0 else gpus
    line = ("%d × %s need ~%s img/s at %d² (%s); %d cores decode ~%s PNG/s (%s per core)"
            % (gpus, kind, count_text(need), image_size, rate_note, cores, count_text(supply), count_text(per_core)))
    ok = supply >= need
    return Capacity(supply, need, fed, ok, line + (": OK" if ok else ": input-bound beyond %d GPU%s; `invoke "
                                                                     "prepare`" % (fed, "" if fed == 1 else "s")))
