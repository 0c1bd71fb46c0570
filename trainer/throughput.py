"""Throughput mode (``--throughput --steps N --warmup-steps W [--amp]``): time training steps, no evaluation.

Runs W + N steps of the real training step (same model, loss, DistributedOptimizer, input pipeline; synthetic or
real data) and reports the MEDIAN step time of the N timed steps after the W warm-up steps (tracing, autotuning
and cuDNN algorithm search happen in the warm-up). images/s per rank = batch / median step time; total = sum over
ranks. Rank 0 writes ``throughput.json``.

With ``--horovod-timeline``, Horovod records its own timeline (``HOROVOD_TIMELINE``, set here before
``hvd.init``; only the coordinator, rank 0, writes it) as ``OUTPUT/horovod-timeline.json``, and each step's input
wait on rank 0 (``callbacks.InputWait``) goes into ``throughput.json`` as ``input_wait_s``; ``bench.attribution``
reads both.
``throughput.json``'s ``host_load`` holds each rank's cores and their accounting over the timed steps
(``trainer.hostload``: the CPUs it could use, its CPU time, /proc/stat and /proc/loadavg at both ends), for images
per CPU-second and the foreign-load flag (``facts.procstat``).
``throughput.json`` also records what a comparison must share: the label file's SHA-256 and the training split's
digest (``outputs.split_digests``), the MPI library (``mpilib``) and the trainable parameters (their float32
gradient bytes are what each step allreduces).
"""
import os
from collections import OrderedDict

import numpy as np
import tensorflow as tf

from trainer import asrun, callbacks, compat, events, loss, mpilib, outputs, runtime, split
from trainer import model as model_mod
from trainer.train import input_resize, input_resize_info, load_data, training_dataset, versions


def start_timeline(output):
    """Point Horovod's timeline at ``output``/``outputs.TIMELINE`` (made absolute; the folder created): Horovod reads
    ``HOROVOD_TIMELINE`` from the environment in ``hvd.init`` (Horovod docs, "Horovod Timeline"), on rank 0 only.
    Every rank calls it before ``hvd.init`` (its rank unknown yet), so two ranks may make the folder at once."""
    path = os.path.abspath(os.path.join(output, outputs.TIMELINE))
    os.makedirs(output, exist_ok=True)
    os.environ["HOROVOD_TIMELINE"] = path
    return path


def trainable_parameters(model):
    """The number of trainable scalars: each step allreduces one float32 gradient per trainable scalar."""
    return int(sum(tf.keras.backend.count_params(w) for w in model.trainable_weights))


def run(options):
    if options.horovod_timeline:
        start_timeline(options.output)
    rt = runtime.start(options.seed, options.deterministic)
    runtime.hold_output(rt, options.output)
    wrap_optimizer = compat.enable_mixed_precision() if options.amp else None
    data = load_data(options, rt, required=(split.TRAIN,))  # it never validates: an empty val split is no matter
    total_steps = options.warmup_steps + options.steps
    learning_rate = options.lr * rt.size
    model = runtime.compile_model(model_mod.build(options.model, options.image_size, options.weights), rt.hvd,
                                  learning_rate, loss.weighted_bce(*loss.class_weights(data.train.labels)),
                                  wrap_optimizer)
    events.emit("run", mode="throughput", world_size=rt.size, epochs=1, initial_epoch=0,
                steps_per_epoch=total_steps, warmup_steps=options.warmup_steps, timed_steps=options.steps,
                batch_size=options.batch_size, image_size=options.image_size, amp=bool(options.amp),
                data="synthetic" if data.label_sha256 is None else "real", n_train=len(data.train), n_val=0,
                device=rt.device, model=options.model, output=options.output)
    timer = callbacks.StepTimer()
    cores = callbacks.HostWindow(options.warmup_steps, total_steps)
    waits = callbacks.InputWait() if options.horovod_timeline else None
    epochs = -(-total_steps // runtime.steps_per_epoch(len(data.train), options.batch_size, rt.size))
    choice = input_resize(data, options, rt)
    dataset = training_dataset(data, options, rt, range(epochs), model, choice)
    model.fit(waits.stamped(dataset) if waits else dataset, steps_per_epoch=total_steps, epochs=1, verbose=0,
              callbacks=runtime.horovod_callbacks(rt.hvd, learning_rate, 0, total_steps)
              + [timer, cores, callbacks.Progress(total_steps)] + ([waits] if waits else []))
    timed = timer.step_times()[options.warmup_steps:]
    per_rank = compat.allgather(np.array([options.batch_size / float(np.median(timed))]),
                                "chexstack_throughput")
    hosts = runtime.rank_hosts(rt)
    as_run = asrun.gathered(rt)
    host_load = asrun.gathered(rt, cores.window.entry(), "chexstack_host_load")
    if rt.chief:
        result = OrderedDict([
            ("images_per_sec", OrderedDict([("total", float(np.sum(per_rank))),
                                            ("per_rank", [float(v) for v in per_rank])])),
            ("step_times_s", [float(t) for t in timer.step_times()]), ("warmup_steps", options.warmup_steps),
            ("timed_steps", options.steps), ("world_size", rt.size), ("hosts", hosts), ("model", options.model),
            ("batch_size", options.batch_size), ("image_size", options.image_size), ("amp", bool(options.amp)),
            ("device", rt.device), ("data", "synthetic" if data.label_sha256 is None else data.label_file),
            ("versions", versions()), ("as_run", as_run), ("host_load", host_load),
            ("mpi", mpilib.record()),
            ("label_sha256", data.label_sha256),
            ("splits", outputs.split_digests([(split.TRAIN, data.train)]) if data.label_sha256 else None),
            ("trainable_parameters", trainable_parameters(model)), ("input_resize", input_resize_info(choice)),
        ])
        if waits:
            result["input_wait_s"] = waits.waits()
            result["timeline"] = outputs.TIMELINE
        outputs.write_json(os.path.join(options.output, outputs.THROUGHPUT), result)
        events.info("throughput: %.1f images/s total (%s per rank), median of %d steps after %d warm-up steps"
                    % (result["images_per_sec"]["total"], ", ".join("%.1f" % v for v in per_rank),
                       options.steps, options.warmup_steps))
        events.emit("done", output=options.output)
    return 0
