"""``python -m trainer`` -- the trainer's command line, the workload's contract with every host area.

Every option, its default and its meaning is declared once, by ``parser()`` below (its help texts are what
``python -m trainer --help`` and ``invoke train --help`` print; ``launch.options.with_trainer_options`` reads them
from here, and no other file restates one). Data is one of ``--data DIR`` (``Data_Entry_2017*.csv[.gz]`` in DIR, PNGs
anywhere below it; ``train_val_list.txt`` and ``test_list.txt`` in DIR are honoured), ``--images DIR --labels FILE``,
``--data synthetic`` (random images and labels, no files) or ``--data PREP``, a prepared copy (``trainer.prepared``:
its layout and manifest, schema ``chexstack.prepared/1``). Two more commands share the runtime:
``python -m trainer prepare`` (``trainer.prepare``, run by ``invoke prepare``) and ``python -m trainer evaluate``
(``trainer.evaluate``: scores a saved model, writes ``evaluation.json`` and ``predictions.csv``; run by ``invoke
evaluate``). Throughput mode (``--throughput``) trains without evaluation and writes ``throughput.json``.

Exit status 0, or 2 with one line ``trainer: error: ...`` on stderr (bad input, unknown option, refused resume,
output folder in use: ``trainer.usage``). The outputs under ``--output`` are ``trainer.outputs``'s docstring; rank 0's
progress events (``@chexstack {"event": ...}``, read by ``trainer.events.parse`` behind horovodrun's rank prefix) are
``trainer.events``'s; the ``run`` event's ``hosts`` is how a failure names the ranks of a lost host.

The host enters the trainer through one door, ``trainer.preflight`` (Python 3.5, no TensorFlow): the option parser
(``parse_options(argv)``, ``check_options(argv)``), the inputs and output folder here (``check_here(argv)``), the
``--resume`` rules (``check_resume(argv, output)``), a prepare's and an evaluation's checks (``check_prepare``,
``check_evaluate``), the run lock's token and ``CLASSES``; ``tests/test_layers.py`` refuses any other trainer import
outside ``bench/ratios/``.

Invariants the host relies on: epoch e's batches and augmentation are a function of (seed, e) (``trainer.order``,
NumPy only): every training image once per epoch across ranks, the same number of steps on every rank, and a resumed
run continues exactly as the uninterrupted one (the recipe's state is replayed from ``metrics.json``; a run whose
training ended is never trained again, only finished by ``--resume``). Before validation, testing and saving every
rank holds the same variables: BatchNorm statistics are recomputed ("precise BN", ``trainer.batchnorm``), averaged
over the ranks (``trainer.train.synchronise_statistics``), then the weight checksum is compared.

Run it under ``horovodrun`` (``invoke train`` builds that command); a plain ``python -m trainer`` is world size 1.
Environment: ``CHEXSTACK_REQUIRE_GPU=1`` (set by the launchers for ``--gpus N > 0``): a rank whose TensorFlow sees no
GPU stops before training instead of training on CPU (https://github.com/tensorflow/tensorflow/issues/45930: missing
CUDA libraries leave TF CPU-only). ``CHEXSTACK_OUTPUT_LOCK``: the token of the output lock a launcher holds
(``trainer.runlock``).

This module imports no TensorFlow and no run module (``--help`` and bad options answer at once; the host launcher
runs ``parse`` and ``check`` on its request before starting horovodrun); ``trainer/__main__.py`` starts the runs.
"""
import argparse
import os

from trainer import recipe, sources, split
from trainer.backbones import BACKBONES, MIN_IMAGE_SIZE
from trainer.errors import TrainerError
from trainer.sources import SYNTHETIC
from trainer.usage import Parser

#: set to "1" by a launcher that asked for GPUs: no GPU visible to TensorFlow is then an error (``runtime.start``)
REQUIRE_GPU_ENV = "CHEXSTACK_REQUIRE_GPU"
#: the SHA-256 (hex) of the SIF file a rank runs in, set by chexstack's launcher from the file it hands to
#: ``apptainer exec`` (a SIF cannot hold its own digest); recorded in the run record (``runtime.container``)
SIF_SHA256_ENV = "CHEXSTACK_SIF_SHA256"
#: Set by Slurm OCI batch scripts (``launch.slurm_oci``) for every rank in the bundle, as run record key -> variable
#: (``trainer.runtime.container``): the bundle's path, the image reference and Docker image ID it was made from, its
#: OCI manifest digest (``images.oci``' record), and how the ranks found each other (``trainer.slurm_gloo``).
OCI_ENV = (("bundle", "CHEXSTACK_OCI_BUNDLE"), ("image", "CHEXSTACK_OCI_IMAGE"), ("digest", "CHEXSTACK_OCI_DIGEST"),
           ("image_id", "CHEXSTACK_OCI_IMAGE_ID"), ("rendezvous", "CHEXSTACK_RENDEZVOUS"))


#: Default of ``--bn-images``: images (all ranks together) whose BatchNorm statistics replace the moving averages
#: at every epoch end (``trainer.batchnorm``): the whole training split of the 800-image sample; on the full
#: dataset a seeded sample, a forward pass over 2.4 % of its 86 524 training images per epoch.
BN_IMAGES = 2048

#: ``--input-resize``'s choices (``trainer.device_input``)
INPUT_RESIZE = ("auto", "host", "device")

#: Default of ``--max-bad-images``: NIH's full set decodes completely; a share above 1 % is a broken copy.
MAX_BAD_IMAGES = 0.01


def parser():
    p = Parser(prog="python -m trainer", description="Horovod CheXNet trainer (run it under horovodrun).",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--data", metavar="DIR|synthetic", help="dataset folder, or 'synthetic'")
    data.add_argument("--images", metavar="DIR", help="folder with the PNGs (searched recursively)")
    data.add_argument("--labels", metavar="FILE", help="label file Data_Entry_2017*.csv or .csv.gz")
    data.add_argument("--train-val-list", metavar="FILE", help="official train_val_list.txt")
    data.add_argument("--test-list", metavar="FILE", help="official test_list.txt")
    data.add_argument("--val-fraction", type=float, default=0.1, help="share of patients for validation (%(default)s)")
    data.add_argument("--test-fraction", type=float, default=0.2,
                      help="share of patients held out for test without official lists (%(default)s)")
    data.add_argument("--input-resize", default="auto", choices=INPUT_RESIZE,
                      help="where training images are resized and augmented: on the host's cores, or in the step "
                           "on the device (GPU), the host only decoding; auto: device on GPUs from PNGs (%(default)s)")
    data.add_argument("--synthetic-images", type=int, default=1024, help="training images of --data synthetic")
    data.add_argument("--max-bad-images", type=float, default=MAX_BAD_IMAGES, metavar="SHARE",
                      help="stop when more than this share of the labelled images fail the PNG check or the decode "
                           "(%(default)g; 0: any bad image stops the run, 1: never)")
    run = p.add_argument_group("model and run")
    run.add_argument("--model", default="densenet121", choices=sorted(BACKBONES),
                     help="the backbone, one of %s (%%(default)s, CheXNet's)" % ", ".join(sorted(BACKBONES)))
    run.add_argument("--weights", default="none", metavar="none|imagenet|PATH",
                     help="initial weights: random, Keras' ImageNet weights (downloaded once; needs the internet), "
                          "or a local .h5 of the backbone without top or of a whole chexstack model")
    run.add_argument("--epochs", type=int, default=1, help="total epochs (also with --resume)")
    run.add_argument("--batch-size", type=int, default=16, help="images per rank per step")
    run.add_argument("--image-size", type=int, default=224, help="input side in pixels (>= 32)")
    run.add_argument("--lr", type=float, default=1e-3,
                     help="base learning rate, times world size (%(default)g, CheXNet's)")
    run.add_argument("--warmup-epochs", type=float, default=None, metavar="EPOCHS",
                     help="LR warm-up from lr to lr x world size (default: Goyal et al. 2017's 5 of 90 epochs, "
                          "i.e. ceil(--epochs / 18), at most 5)")
    run.add_argument("--seed", type=int, default=0,
                     help="fixes the split, initial weights, epoch order and augmentation (Python, NumPy, TF)")
    run.add_argument("--deterministic", action="store_true",
                     help="TensorFlow op determinism (TF >= 2.9; older TF says it has none)")
    schedule = p.add_argument_group("recipe (after the warm-up)")
    schedule.add_argument("--monitor", default="val_loss", choices=("val_loss", "mean_auroc"),
                          help="what picks the best epoch (model-best.h5) and drives LR decay and early stopping")
    schedule.add_argument("--lr-patience", type=int, default=1,
                          help="epochs without improvement before the LR is divided (%(default)s, CheXNet's)")
    schedule.add_argument("--lr-factor", type=float, default=0.1,
                          help="LR multiplier on a plateau (%(default)g, CheXNet's)")
    schedule.add_argument("--min-lr", type=float, default=None, metavar="LR",
                          help="the LR decays no lower than this, times world size as --lr (default: --lr x %g, "
                               "three decays by CheXNet's 10; 0: no floor, Keras' min_lr default)"
                               % recipe.MIN_LR_OF_LR)
    schedule.add_argument("--min-delta", type=float, default=recipe.MIN_DELTA, metavar="DELTA",
                          help="an epoch improves when it beats the best by more than this (%(default)g, Keras' "
                               "ReduceLROnPlateau default)")
    schedule.add_argument("--early-stop", type=int, default=recipe.EARLY_STOP, metavar="EPOCHS",
                          help="once the LR is at its floor (--min-lr), stop after this many epochs at it without "
                               "improvement (%(default)s: the first such epoch ends the run; 0: never)")
    schedule.add_argument("--bn-images", type=int, default=BN_IMAGES, metavar="N",
                          help="at each epoch end, BatchNorm statistics recomputed with the epoch's weights on N "
                               "un-augmented training images (precise BN, Wu & Johnson 2021; %(default)s; 0: Keras' "
                               "moving averages)")
    schedule.add_argument("--rotation", type=float, default=5.0, help="random rotation range, +- degrees (%(default)g)")
    schedule.add_argument("--shift", type=float, default=0.05, help="random shift range, +- fraction of the side")
    schedule.add_argument("--zoom", type=float, default=0.1, help="random zoom range, 1 +- this (%(default)g)")
    schedule.add_argument("--no-hflip", dest="hflip", action="store_false",
                          help="no random horizontal flips (on by default, as in CheXNet; never vertical flips)")
    evaluation = p.add_argument_group("held-out test")
    evaluation.add_argument("--bootstrap", type=int, default=1000,
                            help="bootstrap resamples of patients for the test AUROC intervals (0: none)")
    evaluation.add_argument("--baseline-size", type=int, default=16, metavar="PIXELS",
                            help="logistic-regression baseline on PIXELS x PIXELS down-sampled images (0: none)")
    run.add_argument("--output", default="runs/train", metavar="DIR",
                     help="the run's folder: metrics.json, predictions.csv, model.h5, checkpoint/ (%(default)s)")
    run.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    tp = p.add_argument_group("throughput mode")
    tp.add_argument("--throughput", action="store_true", help="time steps only: writes throughput.json")
    tp.add_argument("--steps", type=int, default=50, help="timed steps")
    tp.add_argument("--warmup-steps", type=int, default=10, help="untimed steps before them")
    tp.add_argument("--amp", action="store_true", help="mixed precision (float16 compute, loss scaling)")
    tp.add_argument("--horovod-timeline", action="store_true",
                    help="also record Horovod's timeline (HOROVOD_TIMELINE) as OUTPUT/horovod-timeline.json and "
                         "each step's input wait in throughput.json, to split a step into compute, input wait and "
                         "exposed allreduce (bench.attribution)")
    return p


def parse(argv=None):
    """The options of ``argv`` (default ``sys.argv[1:]``); TrainerError for unknown options and bad values."""
    return parser().parse_args(argv)


def _official_lists(options):
    """Whether the split comes from official lists (then --test-fraction does not apply)."""
    if options.train_val_list or options.test_list:
        return True
    return bool(options.data and options.data != SYNTHETIC and any(sources.find_split_lists(options.data)))


def _check_output_apart(options):
    """TrainerError when ``--output`` is the data's own folder (``--data`` or ``--images``) or a prepared copy: the
    run's model.h5, checkpoint/, splits.csv and skipped-images.csv would be written among the images or shards (a
    prepared copy has a skipped-images.csv of its own)."""
    from trainer import prepared  # (numpy: only when an --output is judged, not for --help)

    output = os.path.realpath(options.output)
    for name, folder in (("--data", options.data), ("--images", options.images)):
        if folder and folder != SYNTHETIC and os.path.realpath(folder) == output:
            raise TrainerError("--output %s is the %s folder: the run's files would be written among the data; "
                               "choose another folder" % (options.output, name))
    if prepared.is_prepared(options.output):
        raise TrainerError("--output %s is a prepared copy (%s): the run's files would be written among its shards; "
                           "choose another folder" % (options.output, prepared.MANIFEST))


def already_sized(kind):
    """Why ``--input-resize device`` has nothing to move for data of ``kind`` ("png", "prepared", "synthetic"): a
    phrase, or None for PNGs."""
    if kind == "png":
        return None
    return "the data are %s, already at the model's size: there is no resize to move" % (
        "a prepared copy" if kind == "prepared" else "synthetic images")


def _check_input_resize(options):
    """TrainerError for ``--input-resize device`` with data that are at the model's size already (synthetic images,
    a prepared copy): known from the options and the --data folder, before any rank starts (``device_input.choose``
    says the same to a rank, and judges what needs TensorFlow and the GPUs)."""
    if options.input_resize != "device":
        return
    from trainer import prepared

    kind = "synthetic" if options.data == SYNTHETIC else "prepared" if prepared.is_prepared(options.data) else "png"
    if already_sized(kind):
        raise TrainerError("--input-resize device: %s; use --input-resize host or auto" % already_sized(kind))


def check(options):
    """Raise a TrainerError for option values and combinations that cannot run (the data and output are not
    looked at, except whether ``--data DIR`` holds official split lists and whether ``--output`` is the data's
    own folder or a prepared copy)."""
    explicit = options.images is not None or options.labels is not None
    if options.data and explicit:
        raise TrainerError("give either --data or --images with --labels, not both")
    if not options.data and options.images and not options.labels:
        raise TrainerError("--images %s without --labels: give --labels FILE (ChestX-ray14's Data_Entry_2017_v2020.csv)"
                           % options.images)
    if not options.data and options.labels and not options.images:
        raise TrainerError("--labels %s without --images: give --images DIR (the folder of the PNGs)"
                           % options.labels)
    if not options.data and not (options.images and options.labels):
        raise TrainerError("no data: give --data DIR, --data synthetic, or --images DIR with --labels FILE")
    if options.data == SYNTHETIC and (options.train_val_list or options.test_list):
        raise TrainerError("--train-val-list/--test-list do not apply to --data synthetic")
    for name in ("epochs", "batch_size", "synthetic_images", "steps"):
        if getattr(options, name) < 1:
            raise TrainerError("--%s %d: expected at least 1" % (name.replace("_", "-"), getattr(options, name)))
    if options.warmup_steps < 0 or (options.warmup_epochs or 0) < 0:
        raise TrainerError("--warmup-steps and --warmup-epochs cannot be negative")
    smallest = MIN_IMAGE_SIZE[options.model]
    if options.image_size < smallest:
        raise TrainerError("--image-size %d: %s needs at least %d pixels (tf.keras.applications)"
                           % (options.image_size, options.model, smallest))
    for name in ("lr_patience", "early_stop", "bootstrap", "baseline_size", "bn_images"):
        if getattr(options, name) < 0:
            raise TrainerError("--%s %d cannot be negative" % (name.replace("_", "-"), getattr(options, name)))
    if not 0 < options.lr_factor <= 1:
        raise TrainerError("--lr-factor %g: expected a value in (0, 1]" % options.lr_factor)
    if not (0 <= options.rotation <= 45 and 0 <= options.shift < 0.5 and 0 <= options.zoom < 0.5):
        raise TrainerError("--rotation %g / --shift %g / --zoom %g: expected 0..45 degrees and fractions in [0, 0.5)"
                           % (options.rotation, options.shift, options.zoom))
    if not 0 <= options.max_bad_images <= 1:
        raise TrainerError("--max-bad-images %g: expected a share from 0 to 1" % options.max_bad_images)
    if options.lr <= 0:
        raise TrainerError("--lr %g must be positive" % options.lr)
    if options.min_lr is not None and not 0 <= options.min_lr <= options.lr:
        raise TrainerError("--min-lr %g: expected a floor from 0 to --lr %g" % (options.min_lr, options.lr))
    if options.min_delta < 0:
        raise TrainerError("--min-delta %g cannot be negative" % options.min_delta)
    # checked for --data synthetic too (which does not split): a value that is wrong is wrong wherever it is given
    split.check_fractions(options.val_fraction, None if _official_lists(options) else options.test_fraction)
    _check_throughput(options)
    _check_output_apart(options)
    _check_input_resize(options)
    return options


def _check_throughput(options):
    """The throughput mode's own options only with ``--throughput``; ``--resume`` never with it."""
    for name in ("amp", "horovod_timeline"):
        if getattr(options, name) and not options.throughput:
            raise TrainerError("--%s is a throughput-mode option (use it with --throughput)"
                               % name.replace("_", "-"))
    if options.resume and options.throughput:
        raise TrainerError("--resume does not apply to --throughput")
