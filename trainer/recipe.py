"""The epoch-end decisions of the training recipe: best epoch, learning-rate decay on a plateau, early stopping.

CheXNet (Rajpurkar et al. 2017, §3.1): "decay the learning rate by a factor of 10 each time the validation loss
plateaus after an epoch, and pick the model with the lowest validation loss". Here: the monitored value is the
pooled validation loss (or the mean AUROC, ``--monitor mean_auroc``); an epoch improves when it beats the best so
far; after ``patience`` epochs without improvement the LR is multiplied by ``factor`` (then the count restarts,
as Keras' ReduceLROnPlateau); never while the Horovod warm-up still sets the LR (epochs <= ``warmup_epochs``);
``early_stop`` epochs without improvement end the run (0: never).

The state is a function of the monitored values so far, so ``--resume`` rebuilds it from metrics.json
(``replay``) and continues exactly as the uninterrupted run. No TensorFlow here.
"""
import math

#: Goyal et al. 2017 (https://arxiv.org/abs/1706.02677, §2.2 and §5.1): 5 warm-up epochs of a 90-epoch schedule
WARMUP_EPOCHS, WARMUP_OF_EPOCHS = 5.0, 90.0


def warmup_epochs(requested, epochs):
    """The LR warm-up length in epochs: ``requested`` (``--warmup-epochs``) when given, else Goyal et al.'s 5
    epochs scaled to the run's share of their 90, rounded up to whole epochs: ``min(5, ceil(epochs * 5 / 90))``
    (1 for up to 18 epochs, 5 from 73 on).

    A fixed 5 epochs would ramp the LR for half of a 10-epoch run and hold off the plateau decay as long. Whole
    epochs because Horovod's ``LearningRateWarmupCallback`` adjusts the LR through every batch of an epoch it
    starts in the warm-up: a fractional end overshoots lr x world size and leaves the LR there.
    """
    if requested is not None:
        return float(requested)
    return float(min(WARMUP_EPOCHS, math.ceil(epochs * WARMUP_EPOCHS / WARMUP_OF_EPOCHS)))


class Plateau(object):
    """Best value/epoch, epochs since the last improvement or decay, number of LR decays so far."""

    def __init__(self, monitor="val_loss", patience=1, factor=0.1, early_stop=0, warmup_epochs=0):
        self.monitor, self.patience, self.factor = monitor, patience, factor
        self.early_stop, self.warmup_epochs = early_stop, warmup_epochs
        self.best, self.best_epoch = None, 0
        self.wait, self.since_best, self.decays = 0, 0, 0

    def _better(self, value):
        if value is None:
            return False
        if self.best is None:
            return True
        return value < self.best if self.monitor == "val_loss" else value > self.best

    def update(self, epoch, value):
        """Record epoch ``epoch`` (1-based) with monitored ``value`` (None: not computable, never an improvement).
        Returns (improved, decayed, stop)."""
        improved = self._better(value)
        decayed = False
        if improved:
            self.best, self.best_epoch, self.wait, self.since_best = value, epoch, 0, 0
        else:
            self.since_best += 1
            if epoch >= self.warmup_epochs:
                self.wait += 1
            if self.patience and self.wait >= self.patience and self.factor < 1:
                self.decays += 1
                self.wait = 0
                decayed = True
        stop = bool(self.early_stop) and self.since_best >= self.early_stop
        return improved, decayed, stop

    def lr_multiplier(self):
        return self.factor ** self.decays

    def replay(self, entries):
        """Feed the ``epochs`` entries of metrics.json (in order) through ``update``."""
        for entry in entries:
            self.update(entry["epoch"], entry.get("monitor_value"))
        return self
