"""The training run: data → model → ``model.fit`` with Horovod callbacks → per-epoch pooled evaluation, metrics,
predictions and checkpoint on rank 0 → final model.

Every rank loads the same data description, trains on the batches ``trainer.order`` plans for it (a function of
(seed, epoch): resume replays what the uninterrupted run would have done) for ``steps_per_epoch`` steps and
predicts its shard of the validation split; the end-of-epoch work (``EpochEnd``) runs the same collectives on every
rank in the same order (allgather of images/s, BatchNorm statistics averaged so all ranks hold one model, weight
checksum, predictions, rank 0's monitored value), then every rank takes the same recipe decisions
(``trainer.recipe``: best epoch, LR decay on plateau, early stop) and rank 0 writes. After the last epoch the
best epoch's weights score the held-out test split (``test`` block of metrics.json, test-predictions.csv) and
rank 0 fits the logistic-regression baseline on the same split (``trainer.baseline``), then writes metrics.json's
``run.end``. ``--resume`` of a run whose training had ended but whose ``run.end`` was never written (stopped while
scoring the test split) does only those steps; of a run that ended, nothing (``checkpoint.resume_step``).
"""
import os
import platform
import time
from collections import OrderedDict

import numpy as np
import tensorflow as tf

from trainer import (
    asrun,
    baseline,
    batchnorm,
    callbacks,
    checkpoint,
    compat,
    decodecheck,
    device_input,
    evaluation,
    events,
    loss,
    mpilib,
    order,
    outputs,
    pipeline,
    prepared,
    recipe,
    runtime,
    signals,
    split,
)
from trainer import data as data_mod
from trainer import model as model_mod
from trainer.errors import TrainerError
from trainer.labels import CLASSES
from trainer.sources import SYNTHETIC


def load_data(options, rt, required=(split.TRAIN, split.VAL)):
    """The Data of ``options`` (real or synthetic), checked to give every rank at least one training example and
    the ``required`` splits at least one example (``data.load``). Images that failed the PNG check or the decode
    are listed in ``OUTPUT/skipped-images.csv`` (rank 0)."""
    if options.data == SYNTHETIC:
        data = data_mod.synthetic(options.synthetic_images, max(rt.size, options.synthetic_images // 4),
                                  options.seed)
    else:
        data = data_mod.load(options, skipped_list=os.path.join(options.output, outputs.SKIPPED_IMAGES),
                             decode_check=decodecheck.checker(rt), required=required)
    if len(data.train) < rt.size:
        raise TrainerError("%d training images for %d ranks: every rank needs at least one"
                           % (len(data.train), rt.size))
    return data


def data_kind(data):
    """"synthetic", "prepared" or "png": what the run's images are."""
    if data.label_file == SYNTHETIC:
        return "synthetic"
    return "prepared" if data.prepared is not None else "png"


def loader_for(data, image_size):
    kind = data_kind(data)
    if kind == "synthetic":
        return pipeline.synthetic_loader(image_size)
    if kind == "prepared":
        return prepared.loader(data.prepared, image_size)
    return pipeline.png_loader(image_size)


def augmentation(options):
    return order.Augmentation(options.rotation, options.shift, options.zoom, options.hflip)


def input_resize(data, options, rt):
    """Where the training images are resized and augmented: a ``device_input.Choice`` for ``--input-resize``."""
    return device_input.choose(options.input_resize, data_kind(data), data.train.paths, rt.device)


def training_dataset(data, options, rt, epochs, model, choice):
    """This rank's training stream for the 0-based ``epochs`` (a range), as ``trainer.order`` plans it, for
    ``model``: when ``choice`` (``input_resize``) says "device", the stream carries full-size uint8 images and their
    transforms, and ``model``'s step resizes and augments them (``device_input.install``)."""
    aug = augmentation(options)
    rows, transforms, lengths = order.rank_stream(len(data.train), options.batch_size, rt.rank, rt.size,
                                                  options.seed, epochs, options.image_size, aug)
    if choice.mode == "device":
        device_input.install(model, choice, options.image_size, aug.active())
        return pipeline.training(data.train.paths, data.train.labels, rows, transforms, lengths,
                                 pipeline.source_loader(choice.source, uniform=not choice.others), aug.active(),
                                 in_step=True)
    return pipeline.training(data.train.paths, data.train.labels, rows, transforms, lengths,
                             loader_for(data, options.image_size), aug.active())


def input_resize_info(choice):
    """The run record's ``input_resize`` block."""
    return OrderedDict([("where", choice.mode), ("why", choice.reason),
                        ("source_size", list(choice.source) if choice.source else None),
                        ("other_sizes", choice.others)])


def versions():
    """Python, TensorFlow, Horovod and the MPI library this process runs under (``trainer.mpilib``: its
    ``MPI_Get_library_version``; ``openmpi`` for Open MPI, else ``mpi``, absent without a mapped libmpi)."""
    found = {"python": platform.python_version(), "tensorflow": compat.tf_version(),
             "horovod": compat.horovod_version()}
    found.update(mpilib.versions_entry(mpilib.record()))
    return found


def synchronise_statistics(rt, model, tag):
    """Replace every rank's non-trainable variables (BatchNorm moving means and variances) by their mean over the
    ranks, so all ranks hold ONE model before validation, testing and saving.

    Each rank's moving statistics follow only its own batches; without this the pooled validation predictions
    mix rank-specific models and the saved model (rank 0's) is not the one that was evaluated. The mean comes
    from an allgather, so every rank computes it from the same numbers and gets the same bits.
    """
    weights = model.non_trainable_weights
    if rt.size == 1 or not weights:
        return
    values = tf.keras.backend.batch_get_value(weights)
    flat = np.concatenate([np.ravel(v).astype(np.float64) for v in values])
    mean = compat.allgather(flat.reshape(1, -1), "chexstack_statistics_%s" % tag).mean(axis=0)
    updates, start = [], 0
    for weight, value in zip(weights, values):
        updates.append((weight, mean[start:start + value.size].reshape(value.shape).astype(value.dtype)))
        start += value.size
    tf.keras.backend.batch_set_value(updates)


def _weights_checksum_in_sync(rt, model):
    """Every rank's sum of all weights (trainable and, after ``synchronise_statistics``, BatchNorm statistics)
    must match rank 0's: a cheap catch of replicas that diverged — a missing initial broadcast
    (https://github.com/horovod/horovod/issues/478), or ranks applying the same averaged gradient differently (as TF
    1.12's Keras Adam did
    under Horovod 0.16.1 until ``compat.adam`` ordered its step counter; it caught that)."""
    values = tf.keras.backend.batch_get_value(model.weights)
    total = np.array([sum(float(np.sum(w, dtype=np.float64)) for w in values)], dtype=np.float64)
    sums = compat.allgather(total, "chexstack_weight_checksum")
    if rt.chief and not np.allclose(sums, sums[0], rtol=1e-5, atol=1e-6):
        raise TrainerError("model weights differ between ranks after an epoch (checksums %s): the replicas "
                           "diverged. Either the initial broadcast from rank 0 did not happen, or the ranks applied "
                           "the same averaged gradient differently (an optimizer whose update depends on timing, "
                           "e.g. TF 1.12's Keras Adam without trainer.compat.adam)" % sums.tolist())


def predict_pooled(rt, model, subset, batch_size, loader, tag):
    """Every rank predicts its share of ``subset``; returns the pooled (indices, scores) on every rank."""
    indices = pipeline.shard(np.arange(len(subset), dtype=np.int64), rt.rank, rt.size)
    dataset = None  # a rank with no row (fewer rows than ranks) only joins the gather
    if len(indices):
        dataset = pipeline.evaluation(pipeline.shard(subset.paths, rt.rank, rt.size), indices, batch_size, loader)
    indices, scores = evaluation.predict_shard(model, dataset)
    return evaluation.pool(indices, scores, tag)


class EpochEnd(tf.keras.callbacks.Callback):
    """Images/s, one model on all ranks, rank sync check, pooled validation loss and AUROC, the recipe's decisions
    (best epoch, LR decay, early stop, the same on every rank); on rank 0: metrics.json, predictions.csv,
    checkpoint, model-best.h5."""

    def __init__(self, rt, options, data, run, history, timer, identity, plateau, base_lr, class_weights):
        super(EpochEnd, self).__init__()
        self.rt, self.options, self.data, self.run, self.history = rt, options, data, run, history
        self.timer, self.identity, self.plateau, self.base_lr = timer, identity, plateau, base_lr
        self.class_weights = class_weights
        self.loader = loader_for(data, options.image_size)
        self.best_weights = None  # every rank's copy of the best epoch's weights (this process's epochs only)
        self.statistics = None  # batchnorm.Statistics, built at the first epoch end

    def _recompute_statistics(self):
        """This rank's share of ``--bn-images`` un-augmented training images sets the BatchNorm statistics
        (``trainer.batchnorm``); ``synchronise_statistics`` then averages them over the ranks."""
        if not self.options.bn_images:
            return
        if self.statistics is None:
            self.statistics = batchnorm.Statistics(self.model)
        train = self.data.train
        rows = pipeline.shard(order.statistics_rows(len(train), self.options.bn_images, self.options.seed),
                              self.rt.rank, self.rt.size)
        if len(rows):
            paths = [train.paths[i] for i in rows]
            dataset = pipeline.evaluation(paths, rows, self.options.batch_size, self.loader)
            self.statistics.recompute(images for images, _ in compat.iterate_numpy(dataset))

    def on_epoch_end(self, epoch, logs=None):
        number = epoch + 1
        started = time.time()
        per_rank = compat.allgather(np.array([self.timer.images_per_sec(self.options.batch_size)]),
                                    "chexstack_images_per_sec_%d" % number)
        self._recompute_statistics()
        synchronise_statistics(self.rt, self.model, number)
        _weights_checksum_in_sync(self.rt, self.model)
        indices, scores = predict_pooled(self.rt, self.model, self.data.val, self.options.batch_size, self.loader,
                                         number)
        entry = self._entry(number, logs or {}, per_rank, indices, scores) if self.rt.chief else None
        value = compat.broadcast_from_rank0(
            np.array([np.nan if not entry or entry["monitor_value"] is None else entry["monitor_value"]]),
            "chexstack_monitor_%d" % number)[0]
        learning_rate = compat.get_learning_rate(self.model.optimizer)
        at_floor = self.plateau.at_floor()
        improved, decayed, stop = self.plateau.update(number, None if np.isnan(value) else float(value))
        if at_floor and not improved and not stop:
            events.info("epoch %d: the LR is at its floor and %d epoch(s) at it brought no improvement; the run goes "
                        "on (--early-stop %d%s)" % (number, self.plateau.floor_wait, self.plateau.early_stop,
                                                     ": off" if not self.plateau.early_stop else ""))
        if improved:
            self.best_weights = self.model.get_weights()
        if decayed:
            compat.set_learning_rate(self.model.optimizer, self.base_lr * self.plateau.lr_multiplier())
        if stop:
            self.model.stop_training = True
        if self.rt.chief:
            entry.update([("learning_rate", learning_rate), ("lr_at_floor", at_floor), ("improved", improved),
                          ("lr_decayed", decayed), ("lr_decays", self.plateau.decays),
                          ("best_epoch", self.plateau.best_epoch),
                          ("early_stop", stop), ("eval_time_s", float(time.time() - started))])
            self._write(number, entry, indices, improved)

    def _entry(self, number, logs, per_rank, indices, scores):
        val = self.data.val
        indices, scores, missing = evaluation.order_rows(indices, scores, len(val))
        if len(missing):
            events.warn("epoch %d: %d validation images failed to decode and were skipped: %s"
                        % (number, len(missing), ", ".join(val.paths[i] for i in missing[:20])))
            outputs.add_skipped_images(os.path.join(self.options.output, outputs.SKIPPED_IMAGES), [
                {"path": val.paths[i], "reason": "failed to decode in the evaluation of epoch %d" % number}
                for i in missing])
        labels = val.labels[indices]
        auroc = evaluation.auroc_per_class(labels, scores)
        val_loss = loss.weighted_bce_value(labels, scores, *self.class_weights)
        mean_auroc = evaluation.mean_defined(auroc)
        self._rows = (indices, labels, scores)
        return OrderedDict([
            ("epoch", number), ("loss", float(logs["loss"]) if "loss" in logs else None), ("val_loss", val_loss),
            ("auroc", OrderedDict(zip(CLASSES, auroc))), ("mean_auroc", mean_auroc),
            ("n_classes_defined", sum(v is not None for v in auroc)),
            ("monitor", self.plateau.monitor),
            ("monitor_value", val_loss if self.plateau.monitor == "val_loss" else mean_auroc),
            ("images_per_sec", OrderedDict([("per_rank", [float(v) for v in per_rank]),
                                            ("total", float(np.sum(per_rank)))])),
            ("world_size", self.rt.size), ("label_sha256", self.data.label_sha256),
            ("n_train", len(self.data.train)), ("n_val", len(val)),
            ("val_rows", OrderedDict([("expected", len(val)), ("evaluated", int(len(indices))),
                                      ("skipped", [val.paths[i] for i in missing])])),
            ("epoch_time_s", float(sum(self.timer.step_times()))),
        ])

    def _write(self, number, entry, indices, improved):
        self.history.append(entry)
        output = self.options.output
        indices, labels, scores = self._rows
        with signals.held():  # all of them or none: metrics.json never ahead of the checkpoint after Ctrl-C/SIGTERM
            if improved:
                outputs.save_model(self.model, os.path.join(output, outputs.BEST_MODEL), include_optimizer=False)
            outputs.write_metrics(output, self.run, self.history)
            outputs.write_predictions(output, [self.data.val.names[i] for i in indices], labels, scores)
            checkpoint.save(self.model, output, number, self.identity)
        events.emit("epoch_end", epoch=number, loss=entry["loss"], val_loss=entry["val_loss"],
                    mean_auroc=entry["mean_auroc"], auroc=entry["auroc"], best_epoch=entry["best_epoch"],
                    images_per_sec=entry["images_per_sec"]["total"])


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


def _best_weights(rt, model, epoch_end, options):
    """Set the best epoch's weights on every rank: kept in memory when that epoch ran in this process, else
    (a resumed run whose best epoch came before) read from model-best.h5 — resume already needs --output on a
    file system every rank sees. Returns the best epoch (0: none)."""
    best = epoch_end.plateau.best_epoch
    if epoch_end.best_weights is not None:
        model.set_weights(epoch_end.best_weights)
    elif best:
        path = os.path.join(options.output, outputs.BEST_MODEL)
        if not os.path.isfile(path):
            raise TrainerError("the best epoch (%d) came before this resumed run, but %s is missing: cannot score "
                               "the test split with it" % (best, path))
        model.load_weights(path)
    return best


def score_test(rt, model, data, options, loader):
    """Pool every rank's test predictions; on rank 0 write test-predictions.csv and return the ``test`` block and
    (the test rows scored, their scores) (None, None on other ranks)."""
    indices, scores = predict_pooled(rt, model, data.test, options.batch_size, loader, "test")
    if not rt.chief:
        return None, None
    test = data.test
    indices, scores, missing = evaluation.order_rows(indices, scores, len(test))
    labels = test.labels[indices]
    outputs.write_predictions(options.output, [test.names[i] for i in indices], labels, scores,
                              outputs.TEST_PREDICTIONS)
    return evaluation.held_out_block(labels, scores, [test.patients[i] for i in indices], options.bootstrap,
                                     options.seed, len(test), [test.paths[i] for i in missing]), (indices, scores)


def _recipe_info(options, plateau, learning_rate):
    return OrderedDict([
        ("monitor", plateau.monitor), ("lr_patience", plateau.patience), ("lr_factor", plateau.factor),
        ("min_lr", recipe.min_lr(options.min_lr, options.lr)), ("lr_floor", learning_rate * plateau.floor),
        ("min_delta", plateau.min_delta), ("early_stop", plateau.early_stop),
        ("augmentation", OrderedDict([("rotation_deg", options.rotation), ("shift", options.shift),
                                      ("zoom", options.zoom), ("hflip", options.hflip), ("vflip", False)])),
        ("preprocessing", model_mod.PREPROCESSING[options.model]),
        ("batchnorm_statistics", "recomputed each epoch on %d un-augmented training images (precise BN)"
         % options.bn_images if options.bn_images else "moving averages (Keras)"),
        ("resize", "antialiased (tf.image.resize antialias=True; TF 1.x: area)"),
    ])


def _training_ended(options, epoch, plateau):
    """Why training ended with the checkpoint of ``epoch`` (for ``--resume``'s messages)."""
    if epoch >= options.epochs:
        return "it reaches --epochs %d" % options.epochs
    return "the recipe stopped early after it (--early-stop %d)" % plateau.early_stop


def _resume_step(rt, options, state, plateau):
    """``checkpoint.resume_step`` for ``state`` (None: a fresh run, ``TRAIN``), the same on every rank (they read
    one --output), said in a line when it is not ``TRAIN``."""
    epoch = state["epoch"] if state else 0
    step = checkpoint.resume_step(options.output, epoch, options.epochs, plateau.stopped) if state else \
        checkpoint.TRAIN
    seen = compat.allgather(np.array([[epoch, checkpoint.STEPS.index(step)]], dtype=np.int64),
                            "chexstack_resume_epoch")
    if (seen != seen[0]).any():
        raise TrainerError("ranks see different checkpoints or metrics in %s (epoch and step by rank: %s): --output "
                           "must be on a file system shared by all ranks" % (options.output, seen.tolist()))
    if step == checkpoint.DONE:
        events.info("the run in %s already ended after epoch %d (%s) and its results are in %s: nothing to do"
                    % (options.output, epoch, checkpoint.recorded_end(options.output, epoch)["message"],
                       outputs.METRICS))
    elif step == checkpoint.FINISH:
        events.info("training already ended with the checkpoint of epoch %d (%s), but the run was stopped before "
                    "its end (%s has no run.end): finishing it without training (%s, the test split, the baseline, "
                    "%s)" % (epoch, _training_ended(options, epoch, plateau), outputs.METRICS, outputs.MODEL,
                             outputs.METRICS))
    return step


def _end_of_run(rt, options, data, model, epoch_end, run_info, learning_rate):
    """What follows the last epoch: model.h5, the test split scored with the best epoch's weights, the baseline
    and the comparison, and metrics.json's last write with them and ``run.end`` (rank 0). A resumed run whose
    training had ended (``checkpoint.FINISH``) does only this."""
    plateau, initial_epoch = epoch_end.plateau, run_info["initial_epoch"]
    if rt.chief:
        outputs.save_model(model, os.path.join(options.output, outputs.MODEL), include_optimizer=False)
    extra = OrderedDict()
    if len(data.test):
        best = _best_weights(rt, model, epoch_end, options)
        extra["test"], model_rows = score_test(rt, model, data, options, epoch_end.loader)
        if rt.chief:
            extra["test"]["model"] = outputs.BEST_MODEL if best else outputs.MODEL
            extra["test"]["best_epoch"] = best
            if options.baseline_size:
                extra["baseline"], baseline_rows = baseline.run(data, options.baseline_size, options.seed,
                                                                options.bootstrap, lambda size: loader_for(data, size))
                extra["comparison"] = evaluation.baseline_comparison(data.test.labels, data.test.patients,
                                                                     model_rows, baseline_rows, options.bootstrap,
                                                                     options.seed)
    if rt.chief:
        run_info["end_epoch"] = epoch_end.history[-1]["epoch"] if epoch_end.history else initial_epoch
        run_info["end"] = recipe.end_of_run(plateau, run_info["end_epoch"], max(options.epochs, run_info["end_epoch"]),
                                            learning_rate)
        events.info(run_info["end"]["message"])
        outputs.write_metrics(options.output, run_info, epoch_end.history, extra)
        if "test" in extra:
            events.emit("test", mean_auroc=extra["test"]["mean_auroc"], best_epoch=extra["test"]["best_epoch"],
                        auroc=OrderedDict((k, v["auroc"]) for k, v in extra["test"]["auroc"].items()),
                        baseline_mean_auroc=extra.get("baseline", {}).get("mean_auroc"),
                        difference=extra.get("comparison", {}).get("difference"),
                        verdict=extra.get("comparison", {}).get("verdict"))
        events.emit("done", output=options.output)


def _run_info(rt, options, data, plateau, initial_epoch, steps, learning_rate, warmup, w_pos, w_neg):
    """metrics.json's ``run`` block (rank 0 adds ``splits``, and at the end ``end_epoch`` and ``end``)."""
    return OrderedDict([
        ("model", options.model), ("weights", options.weights), ("image_size", options.image_size),
        ("batch_size_per_rank", options.batch_size), ("global_batch_size", options.batch_size * rt.size),
        ("world_size", rt.size), ("hosts", runtime.rank_hosts(rt)), ("device", rt.device),
        ("container", runtime.container()), ("epochs", options.epochs),
        ("initial_epoch", initial_epoch), ("steps_per_epoch", steps), ("lr_base", options.lr),
        ("lr_scaled", learning_rate), ("warmup_epochs", warmup), ("seed", options.seed),
        ("deterministic", rt.deterministic), ("recipe", _recipe_info(options, plateau, learning_rate)),
        ("label_file", os.path.abspath(data.label_file) if data.label_sha256 else data.label_file),
        ("label_sha256", data.label_sha256), ("data", data.report),
        ("class_weights", OrderedDict([("w_pos", OrderedDict(zip(CLASSES, w_pos.tolist()))),
                                       ("w_neg", OrderedDict(zip(CLASSES, w_neg.tolist())))])),
        ("versions", versions()), ("as_run", asrun.gathered(rt)),
    ])


def run(options):
    rt = runtime.start(options.seed, options.deterministic)
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
    history = [e for e in outputs.read_metric_epochs(options.output) if e.get("epoch", 0) <= initial_epoch]
    warmup = recipe.warmup_epochs(options.warmup_epochs, options.epochs)
    plateau = recipe.Plateau(options.monitor, options.lr_patience, options.lr_factor, options.early_stop,
                             warmup if rt.size > 1 else 0, recipe.min_lr(options.min_lr, options.lr) / options.lr,
                             options.min_delta).replay(history)
    step = _resume_step(rt, options, state, plateau)
    if step == checkpoint.DONE:
        return 0
    if state:
        model = _load_checkpoint(rt, options, state, loss_fn)
        compat.set_learning_rate(model.optimizer, learning_rate * plateau.lr_multiplier())
        if step == checkpoint.TRAIN:
            events.info("resuming after epoch %d from %s" % (initial_epoch, checkpoint.folder(options.output)))
    else:
        model = runtime.compile_model(model_mod.build(options.model, options.image_size, options.weights),
                                      rt.hvd, learning_rate, loss_fn)

    choice = input_resize(data, options, rt)
    run_info = _run_info(rt, options, data, plateau, initial_epoch, steps, learning_rate, warmup, w_pos, w_neg)
    run_info["input_resize"] = input_resize_info(choice)
    if rt.chief:
        run_info["splits"] = outputs.write_splits(options.output, [(split.TRAIN, data.train), (split.VAL, data.val),
                                                                   (split.TEST, data.test)])
    timer = callbacks.StepTimer()
    epoch_end = EpochEnd(rt, options, data, run_info, history, timer, identity, plateau, learning_rate,
                         (w_pos, w_neg))
    if step == checkpoint.TRAIN:
        events.emit("run", world_size=rt.size, epochs=options.epochs, initial_epoch=initial_epoch,
                    steps_per_epoch=steps, n_train=len(data.train), n_val=len(data.val), device=rt.device,
                    model=options.model, output=options.output, hosts=run_info["hosts"])
        fit_callbacks = runtime.horovod_callbacks(rt.hvd, learning_rate, warmup, steps) + [
            timer, callbacks.Progress(steps), epoch_end]
        model.fit(training_dataset(data, options, rt, range(initial_epoch, options.epochs), model, choice),
                  steps_per_epoch=steps,
                  epochs=options.epochs, initial_epoch=initial_epoch, callbacks=fit_callbacks, verbose=0)
    _end_of_run(rt, options, data, model, epoch_end, run_info, learning_rate)
    return 0
