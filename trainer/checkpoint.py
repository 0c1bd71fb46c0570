"""Per-epoch checkpoint and ``--resume``.

Layout: ``OUTPUT/checkpoint/epoch-NNNN.h5`` (Keras HDF5: weights + optimizer state) and
``OUTPUT/checkpoint/state.json`` (``{"epoch": N, "model_file": ..., identity...}``). Both are replaced atomically
and ``state.json`` is written LAST: it is the commit record, so the checkpoint it names is always complete. A
crash between the two leaves the previous epoch's pair.

Resume continues after ``state["epoch"]`` up to the same ``--epochs`` total (Keras ``initial_epoch``), so no epoch
is lost or repeated. It is refused when the run's identity differs — above all the label file's SHA-256: labels
changed between NIH releases (https://github.com/jrzech/reproduce-chexnet/issues/2), and a model trained on one must not
silently continue on another.

Only the newest checkpoint is kept. If the file ``state.json`` names cannot be read (truncated or overwritten after
it was committed: a damaged disk or copy, not a crash of ours — a crash leaves the previous complete pair), resume
stops with a TrainerError naming the file and the ways out; it does not fall back on its own: there is no older
checkpoint to fall back to, and silently starting afresh would throw away the epochs the user asked to continue.

A checkpoint that ends training (it reaches ``--epochs``, or the recipe stopped early there) is not the end of the
run: rank 0 then saves ``model.h5``, scores the test split with the best epoch (``test-predictions.csv``), fits the
baseline, and writes metrics.json one last time with the ``test``, ``baseline`` and ``comparison`` blocks and
``run.end``. That write is atomic and the run's last, so ``run.end`` naming the checkpoint's epoch is the evidence
that all of it happened (``test-predictions.csv`` is not: it is written before the test's bootstrap).
``resume_step`` decides from that evidence: train on, finish those steps without training (a run stopped by
Ctrl-C, SIGTERM or a crash after its last epoch), or nothing to do (a run that truly ended).
"""
import glob
import os
import time

from trainer import outputs
from trainer.errors import TrainerError

FOLDER = "checkpoint"
STATE = "state.json"
IDENTITY = ("label_sha256", "model", "image_size", "seed", "n_train", "n_val")
#: What ``--resume`` does with a committed checkpoint (``resume_step``): train the epochs after it; finish the steps
#: after training (model.h5, the test split, the baseline, the final metrics.json) without training; nothing.
TRAIN, FINISH, DONE = "train", "finish", "done"
STEPS = (TRAIN, FINISH, DONE)


def folder(output):
    return os.path.join(output, FOLDER)


def save(model, output, epoch, identity):
    """Write the checkpoint of completed ``epoch`` (1-based) and drop older ones."""
    name = "epoch-%04d.h5" % epoch
    outputs.save_model(model, os.path.join(folder(output), name), include_optimizer=True)
    state = dict(identity)
    state.update({"epoch": epoch, "model_file": name, "saved_unix": time.time()})
    outputs.write_json(os.path.join(folder(output), STATE), state)
    for old in glob.glob(os.path.join(folder(output), "epoch-*.h5")):
        if os.path.basename(old) != name:
            os.remove(old)


def load_state(output):
    """The committed state.json, or None when there is no checkpoint."""
    state = outputs.read_json(os.path.join(folder(output), STATE))
    if state is None:
        return None
    if not isinstance(state, dict) or "epoch" not in state or "model_file" not in state:
        raise TrainerError("%s: not a chexstack checkpoint state (needs epoch and model_file)"
                           % os.path.join(folder(output), STATE))
    return state


def committed_state(output, resume):
    """The checkpoint to continue from (None for a fresh run), by ``--resume``'s rules: ``--resume`` needs a
    checkpoint; a run without it refuses a folder that holds one. TF-free: the host launcher checks it too."""
    state = load_state(output)
    if state is None:
        if resume:
            raise TrainerError("--resume: no checkpoint in %s (no %s); run without --resume to start afresh"
                               % (folder(output), STATE))
        return None
    if not resume:
        raise TrainerError("%s already holds the checkpoint of epoch %d: pass --resume to continue it, or choose "
                           "another --output" % (output, state["epoch"]))
    return state


def recorded_end(output, epoch):
    """metrics.json's ``run.end`` when it records a run that ended after ``epoch`` with every step after training
    done (the module's docstring says why that is the evidence), else None. TrainerError naming metrics.json when
    it cannot be read."""
    value = outputs.read_json(os.path.join(output, outputs.METRICS))
    run = value.get("run") if isinstance(value, dict) else None
    end = run.get("end") if isinstance(run, dict) else None
    if isinstance(end, dict) and end.get("epoch") == epoch:
        return end
    return None


def resume_step(output, epoch, epochs, stopped_early):
    """What ``--resume`` does with the committed checkpoint of ``epoch`` in ``output``: ``TRAIN`` while it is
    before ``--epochs`` (``epochs``) and the recipe did not stop early there (``stopped_early``: the early stop as
    the run's recorded epochs give it under this run's options, so ``--early-stop 0`` trains on after one);
    otherwise ``DONE`` when metrics.json's ``run.end`` records the end after that epoch, else ``FINISH``."""
    if epoch < epochs and not stopped_early:
        return TRAIN
    return DONE if recorded_end(output, epoch) is not None else FINISH


def recorded_step(output, epochs):
    """(the committed state or None, ``resume_step``'s answer or None) read from ``output`` alone, for the host's
    line after an interrupted run: the early stop is the one metrics.json recorded for the checkpoint's epoch (the
    options of the run that was just stopped)."""
    state = load_state(output)
    if state is None:
        return None, None
    stopped = any(isinstance(e, dict) and e.get("epoch") == state["epoch"] and e.get("early_stop") is True
                  for e in outputs.read_metric_epochs(output))
    return state, resume_step(output, state["epoch"], epochs, stopped)


def unreadable(output, state, error):
    """The TrainerError for a committed checkpoint file that cannot be loaded (``error``: what the loader said)."""
    path = os.path.join(folder(output), state["model_file"])
    return TrainerError("cannot resume: the checkpoint of epoch %d, %s, is damaged (%s). Only the newest checkpoint "
                        "is kept, so there is no earlier one to fall back to: put back an intact copy of that file, "
                        "or start afresh (remove %s, or choose another --output)"
                        % (state["epoch"], path, " ".join(str(error).split()), folder(output)))


def model_path(output, state):
    path = os.path.join(folder(output), state["model_file"])
    if not os.path.isfile(path):
        raise TrainerError("checkpoint %s names %s, which this rank cannot see; --resume needs --output on a "
                           "file system shared by all ranks" % (os.path.join(folder(output), STATE), path))
    return path


def check_identity(state, identity, output):
    """Raise a TrainerError naming every field in which the checkpoint and this run differ (``its model is
    'densenet121', this run's is 'resnet50'; its image_size is …``), so one fix is enough. Only the fields in
    ``identity`` are compared: the launcher checks the ones it knows without loading the data (model, image size,
    label file hash) before it starts any rank; the trainer checks all of ``IDENTITY``."""
    differ = [key for key in IDENTITY if key in identity and state.get(key) != identity[key]]
    if differ:
        raise TrainerError("refusing to resume from %s: %s%s" % (
            os.path.join(folder(output), STATE),
            "; ".join("its %s is %r, this run's is %r" % (key, state.get(key), identity.get(key)) for key in differ),
            " (a different label file; start a new --output)" if "label_sha256" in differ else ""))
