"""The epoch-end decisions of the training recipe: best epoch, learning-rate decay on a plateau, the LR's floor,
early stopping.

CheXNet (Rajpurkar et al. 2017, §3.1, https://arxiv.org/abs/1711.05225): "decay the learning rate by a factor of
10 each time the validation loss plateaus after an epoch, and pick the model with the lowest validation loss".
Here: the monitored value is the pooled validation loss (or the mean AUROC, ``--monitor mean_auroc``); an epoch
improves when it beats the best so far by more than ``min_delta``; after ``patience`` epochs without improvement
the LR is multiplied by ``factor`` (then the count restarts, as Keras' ReduceLROnPlateau), but never below the
floor ``floor`` x the initial LR (Keras' ``min_lr``: ``max(lr * factor, min_lr)``) and never while the Horovod
warm-up still sets the LR (epochs <= ``warmup_epochs``). Once the LR is at its floor (or the schedule never lowers
it: ``patience`` 0 or ``factor`` 1), ``early_stop`` epochs trained at it without improvement end the run (0:
never; ``end_of_run`` then says why the run went on).

The state is a function of the monitored values so far, so ``--resume`` rebuilds it from metrics.json
(``replay``) and continues exactly as the uninterrupted run. No TensorFlow here.
"""
import math
from collections import OrderedDict

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


#: Defaults of the floor, the improvement threshold and early stopping (``--min-lr``, ``--min-delta``,
#: ``--early-stop``). CheXNet names no floor and no stop. Three decays by CheXNet's factor 10: Zech's CheXNet
#: reproduction (https://github.com/jrzech/reproduce-chexnet, model.py) divides the LR by 10 after every epoch
#: without a lower validation loss and stops after 3 epochs without one; brucechou1983/CheXNet-Keras (train.py)
#: uses Keras' ReduceLROnPlateau(factor=0.1, patience=1) with Keras' defaults, no floor (min_lr 0) and no early
#: stop. ``MIN_DELTA`` is Keras' ReduceLROnPlateau default (https://keras.io/api/callbacks/reduce_lr_on_plateau/):
#: an epoch that changes the monitored value by 1e-4 or less is not an improvement. ``EARLY_STOP`` 1: at the floor
#: the schedule can do nothing more, so the first epoch there without improvement ends the run (observed here: a
#: 15-epoch run of this recipe without a floor had validation loss 0.0967 at every epoch from 5 to 15, at an LR
#: of about 1e-7).
MIN_LR_OF_LR, MIN_DELTA, EARLY_STOP = 1e-3, 1e-4, 1

#: relative tolerance of "the LR is at the floor" (factor ** decays is a float product)
_FLOOR_TOLERANCE = 1e-9


def min_lr(requested, lr):
    """The floor of the base LR (``--min-lr``): ``requested`` when given, else ``MIN_LR_OF_LR`` x ``lr``."""
    return float(requested) if requested is not None else lr * MIN_LR_OF_LR


class Plateau(object):
    """Best value/epoch, epochs since the last improvement or decay, number of LR decays so far, epochs trained at
    the floor since the last improvement.

    ``floor``: the lowest LR as a multiple of the initial (scaled) LR, ``--min-lr / --lr`` in [0, 1] (0: none).
    """

    def __init__(self, monitor="val_loss", patience=1, factor=0.1, early_stop=0, warmup_epochs=0, floor=0.0,
                 min_delta=0.0):
        self.monitor, self.patience, self.factor = monitor, patience, factor
        self.early_stop, self.warmup_epochs = early_stop, warmup_epochs
        self.floor, self.min_delta = floor, min_delta
        self.best, self.best_epoch = None, 0
        self.wait, self.since_best, self.decays = 0, 0, 0
        self.floor_wait, self.floor_epoch = 0, 0
        self.stopped = False

    def _better(self, value):
        if value is None:
            return False
        if self.best is None:
            return True
        if self.monitor == "val_loss":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def at_floor(self):
        """Whether the schedule will lower the LR no further: it is at the floor, or it never decays."""
        if not self.patience or self.factor >= 1:
            return True
        return self.factor ** self.decays <= self.floor * (1 + _FLOOR_TOLERANCE)

    def update(self, epoch, value):
        """Record epoch ``epoch`` (1-based) with monitored ``value`` (None: not computable, never an improvement).
        Returns (improved, decayed, stop)."""
        trained_at_floor = self.at_floor()  # the LR of this epoch: set by the decisions of the epochs before
        if trained_at_floor and not self.floor_epoch:
            self.floor_epoch = epoch
        improved = self._better(value)
        decayed = False
        if improved:
            self.best, self.best_epoch, self.wait, self.since_best, self.floor_wait = value, epoch, 0, 0, 0
        else:
            self.since_best += 1
            if trained_at_floor:
                self.floor_wait += 1
            if epoch >= self.warmup_epochs:
                self.wait += 1
            if self.patience and self.wait >= self.patience and not self.at_floor():
                self.decays += 1
                self.wait = 0
                decayed = True
        self.stopped = bool(self.early_stop) and self.floor_wait >= self.early_stop
        return improved, decayed, self.stopped

    def lr_multiplier(self):
        """The LR after the decays so far, as a multiple of the initial (scaled) LR: factor ** decays, at least
        the floor."""
        return max(self.factor ** self.decays, self.floor)

    def replay(self, entries):
        """Feed the ``epochs`` entries of metrics.json (in order) through ``update``."""
        for entry in entries:
            self.update(entry["epoch"], entry.get("monitor_value"))
        return self


def _epochs(n):
    return "%d epoch%s" % (n, "" if n == 1 else "s")


def end_of_run(plateau, last_epoch, epochs, lr):
    """Why the run ended after epoch ``last_epoch`` of ``epochs``, for metrics.json's ``run.end``: a dict
    {"epoch", "reason": "early_stop"|"epochs", "lr_at_floor" (the LR now), "floor_epoch" (the first epoch
    trained at the floor, 0: none), "epochs_at_floor_without_improvement", "best_epoch",
    "message"}. ``lr``: the initial (scaled) LR, so the message names the floor in the LR's own units."""
    floor = lr * plateau.lr_multiplier()
    reached = ("the LR reached its floor %g at epoch %d" % (floor, plateau.floor_epoch)
               if plateau.floor and plateau.patience and plateau.factor < 1 else
               "the LR schedule never lowers the LR (%g)" % floor)
    end = OrderedDict([("epoch", last_epoch), ("reason", None), ("lr_at_floor", plateau.at_floor()),
                       ("floor_epoch", plateau.floor_epoch),
                       ("epochs_at_floor_without_improvement", plateau.floor_wait),
                       ("best_epoch", plateau.best_epoch)])
    if plateau.stopped:
        end["reason"] = "early_stop"
        end["message"] = ("stopped early after epoch %d of %d: %s and %s at it brought no improvement "
                          "(--early-stop %d); best epoch %d" % (last_epoch, epochs, reached,
                                                                _epochs(plateau.floor_wait), plateau.early_stop,
                                                                plateau.best_epoch))
        return end
    end["reason"] = "epochs"
    message = "ran all --epochs %d" % epochs if last_epoch >= epochs else "stopped after epoch %d of %d" % (
        last_epoch, epochs)
    if plateau.floor_wait:
        message += ("; %s and %s at it brought no improvement, but %s" % (
            reached, _epochs(plateau.floor_wait), "--early-stop 0 does not stop the run" if not plateau.early_stop
            else "--early-stop %d needs %s" % (plateau.early_stop, _epochs(plateau.early_stop))))
    elif plateau.floor_epoch:
        message += "; the LR has been at its floor %g since epoch %d" % (floor, plateau.floor_epoch)
    else:
        message += ("; the LR (%g now) has no floor (--min-lr 0)" % floor if not plateau.floor else
                    "; the LR (%g now) did not reach its floor %g" % (floor, lr * plateau.floor))
    end["message"] = message + "; best epoch %d" % plateau.best_epoch
    return end
