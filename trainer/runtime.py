"""Horovod set-up shared by the training and throughput runs (and bench/trainer_overhead.py).

What every Horovod Keras trainer must do (Horovod docs "Horovod with Keras"; the checklist of ../shared/cases/17,
from horovod/horovod#127, #478, #672): init; one GPU per local rank; learning rate × world size with warm-up;
DistributedOptimizer; broadcast of the initial state from rank 0 as the FIRST callback; metric averaging;
``steps_per_epoch = ceil(N_train / (batch_per_rank × world_size))``; checkpoints and logs on rank 0 only.
"""
import math

from trainer import compat, events


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

    @property
    def chief(self):
        return self.rank == 0


def start(seed):
    """``hvd.init()``, rank-0-only output, device pinning, seeds; returns the Runtime."""
    hvd = compat.import_horovod()
    hvd.init()
    events.configure(hvd.rank())
    device = compat.configure_devices(hvd.local_rank(), hvd.local_size())
    compat.set_seed(seed)
    return Runtime(hvd, device)


def steps_per_epoch(n_train, batch_size, size):
    """ceil(N_train / (batch per rank × world size)): one epoch sees the training set once across all ranks."""
    return int(math.ceil(float(n_train) / (batch_size * size)))


def compile_model(model, hvd, learning_rate, loss, wrap_optimizer=None):
    """Compile with Adam at ``learning_rate`` (already × world size) inside Horovod's DistributedOptimizer."""
    optimizer = compat.adam(learning_rate)
    if wrap_optimizer is not None:
        optimizer = wrap_optimizer(optimizer)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer), loss=loss)
    return model


def horovod_callbacks(hvd, learning_rate, warmup_epochs, steps):
    """[broadcast from rank 0 (first), metric averaging, LR warm-up from lr/size to lr over ``warmup_epochs``].

    The warm-up is left out when it would be constant (world size 1) or is switched off (0 epochs).
    """
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback()]
    if warmup_epochs > 0 and hvd.size() > 1:
        callbacks.append(compat.warmup_callback(hvd, learning_rate, warmup_epochs, steps))
    return callbacks
