"""Horovod set-up shared by the training and throughput runs (and bench/ratios/trainer_overhead.py).

What every Horovod Keras trainer must do (Horovod docs "Horovod with Keras"; the checklist of
https://github.com/horovod/horovod/issues/478,
from horovod/horovod#127, #478, #672): init; one GPU per local rank; learning rate × world size with warm-up;
DistributedOptimizer; broadcast of the initial state from rank 0 as the FIRST callback; metric averaging;
``steps_per_epoch = ceil(N_train / (batch_per_rank × world_size))``; checkpoints and logs on rank 0 only.
"""
import atexit
import json
import os
import socket
import sys
from collections import OrderedDict

import numpy as np

from trainer import cli, compat, events, order, outputs, runlock
from trainer.errors import TrainerError


class Runtime(object):
    """The Horovod module and this process's place: ``rank``, ``size`` (world size), ``local_rank``,
    ``local_size``, ``device`` ("GPU" or "CPU")."""

    def __init__(self, hvd, device):
        self.hvd = hvd
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.local_size = hvd.local_size()
        self.device = device
        self.output_lock = None  # rank 0's runlock.OutputLock, held while the Runtime lives (``hold_output``)

    @property
    def chief(self):
        return self.rank == 0

    def release_output(self):
        """Drop rank 0's lock on the output folder (``runlock.OutputLock.release``: a folder the run wrote nothing
        into is left as it was); nothing on other ranks or when the launcher holds it."""
        if self.output_lock is not None:
            self.output_lock.release()
            self.output_lock = None


def start(seed, deterministic=False):
    """``hvd.init()``, rank-0-only output, device pinning, seeds (Python, NumPy, TensorFlow), and with
    ``deterministic`` TensorFlow's op determinism where it exists (a warning where not); returns the Runtime with
    ``deterministic`` True (on), False (not asked) or None (asked, unavailable)."""
    hvd = compat.import_horovod()
    hvd.init()
    events.configure(hvd.rank())
    device = compat.configure_devices(hvd.local_rank(), hvd.local_size())
    if device != "GPU" and os.environ.get(cli.REQUIRE_GPU_ENV) == "1":
        raise TrainerError("GPUs were asked for (--gpus) but TensorFlow %s sees no GPU on %s: its CUDA libraries did "
                           "not load (its 'Could not load dynamic library' warnings name them) or no GPU is visible; "
                           "fix LD_LIBRARY_PATH or use the stack image, or ask for CPU ranks (--gpus 0)"
                           % (compat.tf_version(), socket.gethostname()))
    compat.set_seed(seed)
    determinism = False
    if deterministic:
        determinism = True if compat.enable_op_determinism() else None
        if determinism is None:
            events.warn("--deterministic: TensorFlow %s has no op determinism (tf.config.experimental."
                        "enable_op_determinism needs TF >= 2.9); seeds, order and augmentation are fixed, but "
                        "multi-threaded kernels may still differ from run to run" % compat.tf_version())
    compat.quiet_first_batch_broadcast_warning()
    rt = Runtime(hvd, device)
    rt.deterministic = determinism
    return rt


def hold_output(rt, output):
    """Rank 0 locks ``output`` for the whole run (``trainer.runlock``); every rank learns the verdict.

    Keeps rank 0's OutputLock in ``rt.output_lock`` (None on other ranks, or when this run's launcher holds the
    lock); it is released when the process exits (``atexit``: ``Runtime.release_output``, which leaves a folder the
    run wrote nothing into as it was), else by the kernel. When rank 0 cannot have the folder, every rank raises a
    TrainerError (rank 0 with the reason, the others quietly), so no rank is left waiting in a collective. Rank 0
    then removes temp files a killed run left (``outputs``).
    """
    lock, problem = None, None
    if rt.chief:
        try:
            lock = runlock.acquire_unless_held_for_us(output, " ".join(["python -m trainer"] + sys.argv[1:]))
        except TrainerError as e:
            problem = e
    verdict = compat.allgather(np.array([0 if problem else 1], dtype=np.int64), "chexstack_output_lock")
    if problem is not None:
        raise problem
    if not verdict[0]:
        raise TrainerError("rank 0 could not use --output %s" % output, quiet=True)
    if rt.chief:
        if lock is not None and lock.problem:
            events.warn(lock.problem)
        outputs.remove_stale_temp_files(output)
    rt.output_lock = lock
    if lock is not None:
        atexit.register(rt.release_output)  # every command that holds it (train, throughput, evaluate), however it ends


#: Set by Apptainer / SingularityCE inside a container: the image file it runs
#: (https://apptainer.org/docs/user/main/environment_and_metadata.html).
CONTAINER_ENV = (("apptainer", "APPTAINER_CONTAINER"), ("singularity", "SINGULARITY_CONTAINER"))


#: A SIF's labels as Apptainer writes them inside the container; chexstack's name the Docker image ID the SIF was
#: made from and the stack manifest's SHA-256 (``images.sif``).
SIF_LABELS = "/.singularity.d/labels.json"
SIF_IDENTITY = ("org.chexstack.docker.image.id", "org.chexstack.manifest.sha256")


def container():
    """Where this process runs: ``{"runtime": "apptainer", "image": SIF path, "labels": {the SIF's
    SIF_IDENTITY labels}, "sha256": the SIF file's SHA-256 (hex) when the launcher gave it (``cli.SIF_SHA256_ENV``)}``
    inside a SIF; ``{"runtime": "oci", "bundle", "image", "digest", "image_id", "rendezvous"}`` (``cli.OCI_ENV``, the
    ones set) in a Slurm OCI container; ``{"runtime": "docker"}`` inside a Docker container (its ``/.dockerenv``),
    else None (bare metal)."""
    if os.environ.get(cli.OCI_ENV[0][1]):
        return OrderedDict([("runtime", "oci")] + [(key, os.environ[name]) for key, name in cli.OCI_ENV
                                                    if os.environ.get(name)])
    for runtime, name in CONTAINER_ENV:
        if os.environ.get(name):
            try:
                with open(SIF_LABELS) as f:
                    found = json.load(f)
            except (OSError, ValueError):
                found = {}
            record = OrderedDict([("runtime", runtime), ("image", os.environ[name]),
                                  ("labels", OrderedDict((k, found[k]) for k in SIF_IDENTITY if k in found))])
            if os.environ.get(cli.SIF_SHA256_ENV):
                record["sha256"] = os.environ[cli.SIF_SHA256_ENV]
            return record
    if os.path.exists("/.dockerenv"):
        return OrderedDict([("runtime", "docker")])
    return None


def rank_hosts(rt):
    """The host name (``socket.gethostname()``) of every rank, in rank order: an allgather of each name's UTF-8
    bytes (at most 255) as int32 codes, so a multi-node run records where each rank ran."""
    name = bytearray(socket.gethostname().encode("utf-8")[:255])
    row = np.zeros((1, 256), dtype=np.int32)
    row[0, 0] = len(name)
    row[0, 1:1 + len(name)] = list(name)
    rows = compat.allgather(row, "chexstack_rank_hosts")
    return [bytes(bytearray(int(c) for c in r[1:1 + int(r[0])])).decode("utf-8", "replace") for r in rows]


#: ceil(N_train / (batch per rank x world size)): one epoch sees the training set once across all ranks
steps_per_epoch = order.steps_per_epoch


def compile_model(model, hvd, learning_rate, loss, wrap_optimizer=None):
    """Compile with Adam at ``learning_rate`` (already × world size) inside Horovod's DistributedOptimizer, its
    slots made before the first step (``compat.create_optimizer_weights``: one trace of the train step, not two)."""
    optimizer = compat.adam(learning_rate)
    if wrap_optimizer is not None:
        optimizer = wrap_optimizer(optimizer)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer), loss=loss)
    compat.create_optimizer_weights(model.optimizer, model.trainable_variables)
    return model


def horovod_callbacks(hvd, learning_rate, warmup_epochs, steps):
    """[broadcast from rank 0 (first), metric averaging, LR warm-up from lr/size to lr over ``warmup_epochs``].

    The warm-up is left out when it would be constant (world size 1) or is switched off (0 epochs).
    """
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback()]
    if warmup_epochs > 0 and hvd.size() > 1:
        callbacks.append(compat.warmup_callback(hvd, learning_rate, warmup_epochs, steps))
    return callbacks
