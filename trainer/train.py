"""The training run: data → model → ``model.fit`` with Horovod callbacks → per-epoch pooled evaluation, metrics,
predictions and checkpoint on rank 0 → final model.

Every rank loads the same data description, trains on its shard for ``steps_per_epoch`` steps and predicts its
shard of the validation split; the end-of-epoch work (``EpochEnd``) runs the same collectives on every rank in
the same order (allgather of images/s, weight checksum, predictions), then rank 0 alone computes AUROC and writes.
"""
import os
import platform
import time
from collections import OrderedDict

import numpy as np
import tensorflow as tf

from trainer import (callbacks, checkpoint, compat, data as data_mod, evaluation, events, loss, model as model_mod,
                     outputs, pipeline, runtime, signals)
from trainer.errors import TrainerError
from trainer.labels import CLASSES


def load_data(options, rt):
    """The Data of ``options`` (real or synthetic), checked to give every rank at least one training example.
    Images that failed the PNG check are listed in ``OUTPUT/skipped-images.csv`` (written by rank 0)."""
    if options.data == data_mod.SYNTHETIC:
        data = data_mod.synthetic(options.synthetic_images, max(rt.size, options.synthetic_images // 4),
                                  options.seed)
    else:
        data = data_mod.load(options, skipped_list=os.path.join(options.output, outputs.SKIPPED_IMAGES))
    if len(data.train) < rt.size:
        raise TrainerError("%d training images for %d ranks: every rank needs at least one"
                           % (len(data.train), rt.size))
    return data


def loader_for(data, image_size):
    if data.label_file == data_mod.SYNTHETIC:
        return pipeline.synthetic_loader(image_size)
    return pipeline.png_loader(image_size)


def training_dataset(data, options, rt):
    """This rank's endless training stream."""
    keys = pipeline.shard(data.train.paths, rt.rank, rt.size)
    labels = pipeline.shard(data.train.labels, rt.rank, rt.size)
    return pipeline.training(keys, labels, options.batch_size, loader_for(data, options.image_size),
                             options.seed + rt.rank)


def versions():
    return {"python": platform.python_version(), "tensorflow": compat.tf_version(),
            "horovod": compat.horovod_version()}


def _weights_checksum_in_sync(rt, model):
    """Every rank's sum of trainable weights must match rank 0's: a cheap catch of replicas that diverged —
    a missing initial broadcast (../shared/cases/17), or ranks applying the same averaged gradient differently
    (as TF 1.12's Keras Adam did under Horovod 0.16.1 until ``compat.adam`` ordered its step counter; it caught
    that). BatchNorm moving statistics are per rank by design and not compared."""
    values = tf.keras.backend.batch_get_value(model.trainable_weights)
    total = np.array([sum(float(np.sum(w, dtype=np.float64)) for w in values)], dtype=np.float64)
    sums = compat.allgather(total, "chexstack_weight_checksum")
    if rt.chief and not np.allclose(sums, sums[0], rtol=1e-5, atol=1e-6):
        raise TrainerError("model weights differ between ranks after an epoch (checksums %s): the replicas "
                           "diverged. Either the initial broadcast from rank 0 did not happen, or the ranks applied "
                           "the same averaged gradient differently (an optimizer whose update depends on timing, "
                           "e.g. TF 1.12's Keras Adam without trainer.compat.adam)" % sums.tolist())


class EpochEnd(tf.keras.callbacks.Callback):
    """Images/s, rank sync check, pooled validation AUROC; on rank 0: metrics.json, predictions.csv, checkpoint."""

    def __init__(self, rt, options, data, run, history, timer, identity):
        super(EpochEnd, self).__init__()
        self.rt, self.options, self.data, self.run, self.history = rt, options, data, run, history
        self.timer, self.identity = timer, identity
        indices = np.arange(len(data.val), dtype=np.int64)
        self.val_indices = pipeline.shard(indices, rt.rank, rt.size)
        self.val_dataset = None  # a rank with no validation row (fewer rows than ranks) only joins the gather
        if len(self.val_indices):
            self.val_dataset = pipeline.evaluation(pipeline.shard(data.val.paths, rt.rank, rt.size),
                                                   self.val_indices, options.batch_size,
                                                   loader_for(data, options.image_size))

    def on_epoch_end(self, epoch, logs=None):
        number = epoch + 1
        started = time.time()
        per_rank = compat.allgather(np.array([self.timer.images_per_sec(self.options.batch_size)]),
                                    "chexstack_images_per_sec_%d" % number)
        _weights_checksum_in_sync(self.rt, self.model)
        indices, scores = evaluation.predict_shard(self.model, self.val_dataset)
        indices, scores = evaluation.pool(indices, scores, number)
        if self.rt.chief:
            self._report(number, logs or {}, per_rank, indices, scores, time.time() - started)

    def _report(self, number, logs, per_rank, indices, scores, eval_s):
        val = self.data.val
        indices, scores, missing = evaluation.order_rows(indices, scores, len(val))
        if len(missing):
            events.warn("epoch %d: %d validation images failed to decode and were skipped: %s"
                        % (number, len(missing), ", ".join(val.paths[i] for i in missing[:20])))
        labels = val.labels[indices]
        auroc = evaluation.auroc_per_class(labels, scores)
        entry = OrderedDict([
            ("epoch", number), ("loss", float(logs["loss"]) if "loss" in logs else None),
            ("auroc", OrderedDict(zip(CLASSES, auroc))), ("mean_auroc", evaluation.mean_defined(auroc)),
            ("n_classes_defined", sum(v is not None for v in auroc)),
            ("images_per_sec", OrderedDict([("per_rank", [float(v) for v in per_rank]),
                                            ("total", float(np.sum(per_rank)))])),
            ("world_size", self.rt.size), ("label_sha256", self.data.label_sha256),
            ("n_train", len(self.data.train)), ("n_val", len(val)),
            ("val_rows", OrderedDict([("expected", len(val)), ("evaluated", int(len(indices))),
                                      ("skipped", [val.paths[i] for i in missing])])),
            ("learning_rate", compat.get_learning_rate(self.model.optimizer)),
            ("epoch_time_s", float(sum(self.timer.step_times()))), ("eval_time_s", float(eval_s)),
        ])
        self.history.append(entry)
        output = self.options.output
        with signals.held():  # all three or none: metrics.json never ahead of the checkpoint after Ctrl-C/SIGTERM
            outputs.write_metrics(output, self.run, self.history)
            outputs.write_predictions(output, [val.names[i] for i in indices], labels, scores)
            checkpoint.save(self.model, output, number, self.identity)
        events.emit("epoch_end", epoch=number, loss=entry["loss"], mean_auroc=entry["mean_auroc"],
                    auroc=entry["auroc"], images_per_sec=entry["images_per_sec"]["total"])


def _resume_state(options, identity):
    """The checkpoint state to continue from (or None), enforcing --resume's rules and the run's identity."""
    state = checkpoint.committed_state(options.output, options.resume)
    if state is not None:
        checkpoint.check_identity(state, identity, options.output)
    return state


def _load_checkpoint(rt, options, state, loss_fn):
    """The checkpointed model (optimizer state included), or a TrainerError naming a damaged file."""
    path = checkpoint.model_path(options.output, state)
    try:
        return compat.load_model(rt.hvd, path, {"weighted_bce": loss_fn})
    except (IOError, OSError, ValueError, KeyError) as e:  # h5py: OSError (truncated, not HDF5); Keras: ValueError
        raise checkpoint.unreadable(options.output, state, e)


def run(options):
    rt = runtime.start(options.seed)
    runtime.hold_output(rt, options.output)
    data = load_data(options, rt)
    steps = runtime.steps_per_epoch(len(data.train), options.batch_size, rt.size)
    learning_rate = options.lr * rt.size
    w_pos, w_neg = loss.class_weights(data.train.labels)
    loss_fn = loss.weighted_bce(w_pos, w_neg)
    identity = {"label_sha256": data.label_sha256, "model": options.model, "image_size": options.image_size,
                "seed": options.seed, "n_train": len(data.train), "n_val": len(data.val)}
    state = _resume_state(options, identity)
    initial_epoch = state["epoch"] if state else 0
    seen = compat.allgather(np.array([initial_epoch], dtype=np.int64), "chexstack_resume_epoch")
    if (seen != initial_epoch).any():
        raise TrainerError("ranks see different checkpoints in %s (epochs by rank: %s): --output must be on a file "
                           "system shared by all ranks" % (options.output, seen.tolist()))
    if initial_epoch >= options.epochs:
        events.info("checkpoint of epoch %d already reaches --epochs %d: nothing to do"
                    % (initial_epoch, options.epochs))
        return 0
    if state:
        model = _load_checkpoint(rt, options, state, loss_fn)
        compat.set_learning_rate(model.optimizer, learning_rate)
        events.info("resuming after epoch %d from %s" % (initial_epoch, checkpoint.folder(options.output)))
    else:
        model = runtime.compile_model(model_mod.build(options.model, options.image_size, options.weights),
                                      rt.hvd, learning_rate, loss_fn)

    run_info = OrderedDict([
        ("model", options.model), ("weights", options.weights), ("image_size", options.image_size),
        ("batch_size_per_rank", options.batch_size), ("global_batch_size", options.batch_size * rt.size),
        ("world_size", rt.size), ("hosts", runtime.rank_hosts(rt)), ("device", rt.device),
        ("epochs", options.epochs),
        ("initial_epoch", initial_epoch), ("steps_per_epoch", steps), ("lr_base", options.lr),
        ("lr_scaled", learning_rate), ("warmup_epochs", options.warmup_epochs), ("seed", options.seed),
        ("label_file", os.path.abspath(data.label_file) if data.label_sha256 else data.label_file),
        ("label_sha256", data.label_sha256), ("data", data.report),
        ("class_weights", OrderedDict([("w_pos", OrderedDict(zip(CLASSES, w_pos.tolist()))),
                                       ("w_neg", OrderedDict(zip(CLASSES, w_neg.tolist())))])),
        ("versions", versions()),
    ])
    history = [e for e in outputs.read_metric_epochs(options.output) if e.get("epoch", 0) <= initial_epoch]
    events.emit("run", world_size=rt.size, epochs=options.epochs, initial_epoch=initial_epoch,
                steps_per_epoch=steps, n_train=len(data.train), n_val=len(data.val), device=rt.device,
                model=options.model, output=options.output)
    timer = callbacks.StepTimer()
    fit_callbacks = runtime.horovod_callbacks(rt.hvd, learning_rate, options.warmup_epochs, steps) + [
        timer, callbacks.Progress(steps), EpochEnd(rt, options, data, run_info, history, timer, identity)]
    model.fit(training_dataset(data, options, rt), steps_per_epoch=steps, epochs=options.epochs,
              initial_epoch=initial_epoch, callbacks=fit_callbacks, verbose=0)
    if rt.chief:
        outputs.save_model(model, os.path.join(options.output, outputs.MODEL), include_optimizer=False)
        events.emit("done", output=options.output)
    return 0
