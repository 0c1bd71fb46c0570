"""Per-epoch checkpoint and ``--resume``.

Layout: ``OUTPUT/checkpoint/epoch-NNNN.h5`` (Keras HDF5: weights + optimizer state) and
``OUTPUT/checkpoint/state.json`` (``{"epoch": N, "model_file": ..., identity...}``). Both are replaced atomically
and ``state.json`` is written LAST: it is the commit record, so the checkpoint it names is always complete. A
crash between the two leaves the previous epoch's pair.

Resume continues after ``state["epoch"]`` up to the same ``--epochs`` total (Keras ``initial_epoch``), so no epoch
is lost or repeated. It is refused when the run's identity differs — above all the label file's SHA-256: labels
changed between NIH releases (../shared/cases/18), and a model trained on one must not silently continue on another.
"""
import glob
import os
import time

from trainer import outputs
from trainer.errors import TrainerError

FOLDER = "checkpoint"
STATE = "state.json"
IDENTITY = ("label_sha256", "model", "image_size", "seed", "n_train", "n_val")


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


def model_path(output, state):
    path = os.path.join(folder(output), state["model_file"])
    if not os.path.isfile(path):
        raise TrainerError("checkpoint %s names %s, which this rank cannot see; --resume needs --output on a "
                           "file system shared by all ranks" % (os.path.join(folder(output), STATE), path))
    return path


def check_identity(state, identity, output):
    """Raise a TrainerError naming the first field in which the checkpoint and this run differ."""
    for key in IDENTITY:
        if state.get(key) != identity.get(key):
            raise TrainerError("refusing to resume from %s: its %s is %r, this run's is %r%s"
                               % (os.path.join(folder(output), STATE), key, state.get(key), identity.get(key),
                                  " (a different label file; start a new --output)"
                                  if key == "label_sha256" else ""))
