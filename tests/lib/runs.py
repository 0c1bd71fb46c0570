"""The small real ``invoke train`` runs the launcher tests share: CPU ranks on the real ChestX-ray14 sample."""
from __future__ import annotations

from tests.lib.paths import SAMPLE

LABELS_FILE = SAMPLE / "Data_Entry_2017_v2020.csv.gz"
#: The backbone of the tests whose subject is the launcher, the scheduler, the image or the trainer's bookkeeping
#: rather than the network: on CPU a rank's start is mostly tracing, which grows with the trainable tensors
#: (MobileNet 83, DenseNet-121 364), and MobileNet's starts came 2.55 times as fast as DenseNet-121's at 32²
#: (bench/ratios/backbone_start.py, 2 rounds here). CheXNet's own DenseNet-121 is trained end to end inside the
#: cpu image (tests/test_images_docker.py ``test_train_inside_the_cpu_image``); its train step's tracing is
#: tests/test_trainer_trace.py's subject.
FAST_MODEL = ("--model", "mobilenet")
#: 197 training images (the sample's patients: 10 % validation, 70 % test) -> 4 steps per epoch with 2 x 32; no
#: epoch-end BatchNorm pass and no baseline: these tests are about the launcher (the trainer's tests cover both)
SMALL = ["--gpus", "0", "--np", "2", "--images", str(SAMPLE / "images-64"), "--labels", str(LABELS_FILE),
         *FAST_MODEL, "--image-size", "32", "--batch-size", "32", "--val-fraction", "0.1",
         "--test-fraction", "0.7", "--bn-images", "0", "--baseline-size", "0"]
#: Their environment (added to this one): lines as they come, unwrapped, without TensorFlow's start-up chatter.
ENV = {"PYTHONUNBUFFERED": "1", "COLUMNS": "200", "TF_CPP_MIN_LOG_LEVEL": "2"}


def request(gpus: int = 0, np: int | None = None, controller: str | None = None, **options):
    """A ``launch.request.TrainRequest`` whose trainer command line is ``options`` in the order given:
    ``image_size=64`` -> ``--image-size 64``, ``resume=True`` -> ``--resume``; None and False leave an option out."""
    from launch.request import TrainRequest

    argv: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return TrainRequest(gpus=gpus, np=np, controller=controller, argv=tuple(argv))
