"""Every TensorFlow / tf.keras / Horovod version difference the trainer meets, and nothing else.

The trainer runs in stacks from 2019 (TF 1.12 / 1.13 graph mode, Keras optimizers with ``lr``, Horovod 0.15 / 0.16)
to today (TF 2.15 eager, Keras 2.15 with ``tf.keras.optimizers.legacy``, Horovod 0.28). Each function below picks
the API that exists by looking for it (``hasattr``/signature), never by parsing version numbers, and says which
versions differ and where that is documented.
"""
import inspect
import logging
import numbers
import os
import random
import re
import warnings

import numpy as np
import tensorflow as tf

from trainer.errors import TrainerError

K = tf.keras.backend


def tf_version():
    return tf.__version__


def _has(obj, dotted):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return True


def _params(fn):
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def executing_eagerly():
    """TF 2.x runs eagerly (``model.fit`` compiles a tf.function); TF 1.x builds a graph run by Keras' session."""
    return bool(getattr(tf, "executing_eagerly", lambda: False)())


# --- Horovod ---------------------------------------------------------------------------------------------------

def import_horovod():
    """``horovod.tensorflow.keras`` (present from Horovod 0.13 to 0.28), or a TrainerError saying what is missing."""
    try:
        import horovod.tensorflow.keras as hvd
    except ImportError as e:
        raise TrainerError("cannot import horovod.tensorflow.keras (%s): this environment has no Horovod built "
                           "with TensorFlow; run the trainer inside a chexstack stack" % e)
    return hvd


def horovod_version():
    import horovod
    return getattr(horovod, "__version__", "unknown")


def allgather(array, name):
    """Concatenate ``array`` (shape [n_rank, ...], n_rank may differ per rank) from all ranks in rank order.

    Uses ``horovod.tensorflow.allgather`` (present since Horovod 0.9) on a constant: evaluated eagerly under TF 2.x,
    in Keras' session under TF 1.x (the ops get the same names on every rank because every rank builds them in
    the same order).
    """
    import horovod.tensorflow as hvd_tf
    gathered = hvd_tf.allgather(tf.constant(np.ascontiguousarray(array)), name=name)
    if executing_eagerly():
        return np.asarray(gathered)
    return K.get_session().run(gathered)


def warmup_callback(hvd, initial_lr, warmup_epochs, steps_per_epoch):
    """Horovod's LR warm-up (Goyal et al. 2017, https://arxiv.org/abs/1706.02677) from ``initial_lr / size``.

    Horovod ≤ 0.20 reads the initial LR from the optimizer at ``on_train_begin`` and has no ``initial_lr``
    argument; Horovod ≥ 0.21 requires it (horovod/_keras/callbacks.py: "Parameter `initial_lr` is required").
    Momentum correction is off: Adam has no ``momentum``.
    """
    cls = hvd.callbacks.LearningRateWarmupCallback
    kwargs = {"warmup_epochs": warmup_epochs, "steps_per_epoch": steps_per_epoch, "verbose": 0,
              "momentum_correction": False}
    if "initial_lr" in _params(cls.__init__):
        kwargs["initial_lr"] = initial_lr
    return cls(**kwargs)


def _saved_scalar(value):
    """A layer argument as this TensorFlow's HDF5 writer saved it: TF 1.12 writes a NumPy scalar (what
    ``K.cast_to_floatx`` returns) as ``{"type": "ndarray", "value": 6.0}``; later ones as the number."""
    if isinstance(value, dict) and value.get("type") == "ndarray":
        return value.get("value")
    return value


class ReLU(tf.keras.layers.ReLU):
    """``tf.keras.layers.ReLU`` that reads its arguments back in either saved form (``_saved_scalar``). TF 1.12's
    own cannot load the HDF5 model it saved with a ReLU(max_value=...), every MobileNet's activation: "'<' not
    supported between instances of 'dict' and 'float'" (https://github.com/tensorflow/tensorflow/issues/22697;
    fix proposed in https://github.com/tensorflow/tensorflow/pull/23095)."""

    def __init__(self, max_value=None, negative_slope=0, threshold=0, **kwargs):
        super(ReLU, self).__init__(max_value=_saved_scalar(max_value), negative_slope=_saved_scalar(negative_slope),
                                   threshold=_saved_scalar(threshold), **kwargs)


#: Custom objects every load of a saved model passes: what this TensorFlow's Keras cannot read back by itself.
SAVED_LAYERS = {"ReLU": ReLU}


def load_model(hvd, path, custom_objects):
    """``hvd.load_model``: the Keras HDF5 model with its optimizer state, optimizer wrapped for Horovod.

    Horovod 0.28 looks up optimizer classes among ``tf.keras.optimizers.legacy`` only with ``legacy_opts=True``;
    older Horovod has no such argument (and no legacy optimizers exist before TF 2.11). Layers as ``SAVED_LAYERS``.
    """
    kwargs = {"custom_objects": dict(SAVED_LAYERS, **custom_objects)}
    if "legacy_opts" in _params(hvd.load_model) and _legacy_adam() is not None:
        kwargs["legacy_opts"] = True
    adam_class = _adam_class()
    if adam_class is not _plain_adam_class():
        # Keras v1 lower-cases built-in optimizer names before the lookup; custom objects come first. So the
        # saved "Adam" resumes as the trainer's Adam (_ordered_v1_adam), not as TF 1.12's own.
        kwargs["custom_objects"]["adam"] = lambda **config: hvd.DistributedOptimizer(adam_class(**config))
    return hvd.load_model(path, **kwargs)


# --- optimizer -------------------------------------------------------------------------------------------------

def _legacy_adam():
    legacy = getattr(tf.keras.optimizers, "legacy", None)
    return getattr(legacy, "Adam", None)


def adam(learning_rate):
    """Adam (β1 0.9, β2 0.999, CheXNet's optimizer) of the generation Horovod's DistributedOptimizer wraps.

    TF ≥ 2.11 (Keras 2.11+) made ``tf.keras.optimizers.Adam`` the new optimizer and kept the OptimizerV2 one as
    ``tf.keras.optimizers.legacy.Adam`` (TF 2.11 release notes); we use the legacy one there so that checkpoints,
    LR callbacks and ``hvd.load_model`` behave as in TF 2.0–2.10. The keyword is ``lr`` in TF 1.12/1.13 (Keras
    v1 optimizers) and ``learning_rate`` from TF 1.14 on.
    """
    cls = _adam_class()
    key = "learning_rate" if "learning_rate" in _params(cls.__init__) else "lr"
    return cls(**{key: float(learning_rate)})


def _plain_adam_class():
    return _legacy_adam() or tf.keras.optimizers.Adam


def _adam_class():
    """The Adam class ``adam`` instantiates: tf.keras' own, or for Keras v1 optimizers ``_ordered_v1_adam``."""
    cls = _plain_adam_class()
    return _ordered_v1_adam(cls) if _keras_v1(cls) else cls


def _keras_v1(cls):
    """Whether ``cls`` is a Keras v1 optimizer (TF 1.12/1.13: graph ``get_updates``, no OptimizerV2 kernels)."""
    return hasattr(cls, "get_updates") and not hasattr(cls, "_resource_apply_dense")


_ORDERED = {}


def _ordered_v1_adam(base):
    """Keras v1 Adam whose bias correction reads the step count AFTER incrementing it.

    TF 1.12's ``tf.keras.optimizers.Adam.get_updates`` puts ``assign_add(iterations, 1)`` among the updates and
    computes ``t = iterations + 1`` from a read that nothing orders against that increment, so the session may run
    the read before or after it: the step uses t or t + 1 in its bias correction. With Horovod the asynchronous
    gradient allreduce shifts that timing per rank, so ranks that apply the same averaged gradient still update
    differently and the replicas drift apart (seen here under TF 1.12.0 / Horovod 0.16.1 on CPU: after the first
    step rank 0 had applied Adam's step for t = 2 and rank 1 the one for t = 1; the end-of-epoch weight check
    stops such a run). Later tf.keras reads ``iterations`` under a control dependency on the increment; this is
    that ``get_updates``, otherwise TF 1.12's line for line. Named ``Adam`` so that saved models and Horovod's
    wrapper keep the class name.
    """
    if base not in _ORDERED:
        class Adam(base):
            def get_updates(self, loss, params):
                grads = self.get_gradients(loss, params)
                self.updates = []
                lr = self.lr
                if self.initial_decay > 0:
                    lr = lr * (1. / (1. + self.decay * tf.cast(self.iterations, K.dtype(self.decay))))
                with tf.control_dependencies([tf.assign_add(self.iterations, 1)]):
                    t = tf.cast(self.iterations.read_value(), K.floatx())
                lr_t = lr * (K.sqrt(1. - tf.pow(self.beta_2, t)) / (1. - tf.pow(self.beta_1, t)))
                ms = [K.zeros(K.int_shape(p), dtype=K.dtype(p)) for p in params]
                vs = [K.zeros(K.int_shape(p), dtype=K.dtype(p)) for p in params]
                if self.amsgrad:
                    vhats = [K.zeros(K.int_shape(p), dtype=K.dtype(p)) for p in params]
                else:
                    vhats = [K.zeros(1) for _ in params]
                self.weights = [self.iterations] + ms + vs + vhats
                for p, g, m, v, vhat in zip(params, grads, ms, vs, vhats):
                    m_t = (self.beta_1 * m) + (1. - self.beta_1) * g
                    v_t = (self.beta_2 * v) + (1. - self.beta_2) * tf.square(g)
                    if self.amsgrad:
                        vhat_t = tf.maximum(vhat, v_t)
                        p_t = p - lr_t * m_t / (K.sqrt(vhat_t) + self.epsilon)
                        self.updates.append(tf.assign(vhat, vhat_t))
                    else:
                        p_t = p - lr_t * m_t / (K.sqrt(v_t) + self.epsilon)
                    self.updates.append(tf.assign(m, m_t))
                    self.updates.append(tf.assign(v, v_t))
                    if getattr(p, "constraint", None) is not None:
                        p_t = p.constraint(p_t)
                    self.updates.append(tf.assign(p, p_t))
                return self.updates
        _ORDERED[base] = Adam
    return _ORDERED[base]


def create_optimizer_weights(optimizer, variables):
    """Make the optimizer's slots (Adam's m and v) and step counter for ``variables`` now, before the first step,
    so that TF 2's ``model.fit`` traces its train function once instead of twice.

    A ``tf.function`` whose first call creates variables is traced again for its later calls
    (https://www.tensorflow.org/guide/function#creating_tfvariables), and Keras' OptimizerV2 makes its slots
    lazily, in the first ``apply_gradients``: TF 2.15 / Horovod 0.28 traced the trainer's train step twice
    (``train_function.experimental_get_tracing_count()`` 2, then 1 with this; DenseNet-121 tracing, Horovod's
    per-gradient allreduce included, is most of a rank's start-up on CPU). ``_create_all_weights`` is
    OptimizerV2's own eager slot creation (TF 2.2 to 2.15; ``tf.keras.optimizers.legacy`` from 2.11), inherited by
    Horovod's DistributedOptimizer, which subclasses the optimizer it wraps. TF 1.x (Keras v1 optimizers, graph
    mode) builds the update ops once in ``get_updates``: nothing to do there.
    """
    create = getattr(optimizer, "_create_all_weights", None)
    if create is not None and executing_eagerly():
        create(variables)


def set_learning_rate(optimizer, value):
    """Set the optimizer's LR variable; ``optimizer.lr`` exists in every version (an alias from TF 1.14 on)."""
    K.set_value(optimizer.lr, float(value))


def get_learning_rate(optimizer):
    return float(K.get_value(optimizer.lr))


def enable_mixed_precision():
    """Turn on float16 compute with dynamic loss scaling; returns a function that wraps the optimizer.

    - TF ≥ 2.4: ``tf.keras.mixed_precision.set_global_policy('mixed_float16')`` before the model is built;
      ``Model.compile`` then wraps the optimizer in a LossScaleOptimizer itself (TF 2.4 release notes).
    - TF 1.14 … 2.3: ``tf.train.experimental.enable_mixed_precision_graph_rewrite(optimizer)`` (TF 1.14 release
      notes), which also adds loss scaling.
    - TF 1.12/1.13: no API; NVIDIA's NGC 19.03+ builds of TF 1.13 have ``TF_ENABLE_AUTO_MIXED_PRECISION=1``
      instead (NGC release notes) — a TrainerError says so.
    """
    mp = getattr(tf.keras, "mixed_precision", None)
    if mp is not None and hasattr(mp, "set_global_policy"):
        mp.set_global_policy("mixed_float16")
        return lambda optimizer: optimizer
    rewrite = getattr(getattr(getattr(tf, "train", None), "experimental", None),
                      "enable_mixed_precision_graph_rewrite", None)
    if rewrite is not None:
        return rewrite
    raise TrainerError("--amp: TensorFlow %s has no mixed-precision API (needs TF >= 1.14; NGC TF 1.13 "
                       "builds use the environment variable TF_ENABLE_AUTO_MIXED_PRECISION=1 instead)"
                       % tf.__version__)


# --- devices, threads, seeds -----------------------------------------------------------------------------------

def _gpu_count_from_driver():
    """GPUs visible to this process without initialising CUDA (for TF 1.x): CUDA_VISIBLE_DEVICES, else
    /proc/driver/nvidia/gpus (one folder per GPU, NVIDIA driver README)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and not v.strip().startswith("-")])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def check_gpu_for_rank(local_rank, local_size, gpus):
    """Whether this rank runs on a GPU: False with no GPU visible (a CPU run), True when ``local_rank`` (0-based)
    has one of the host's ``gpus`` visible GPUs; a TrainerError when GPUs are visible but fewer than the host's
    ranks need, so no rank trains on the CPU beside GPU ranks (TF 1.12/1.13 used to fall back silently)."""
    if gpus <= 0:
        return False
    if local_rank >= gpus:
        raise TrainerError("local rank %d has no GPU: this host has %d GPUs for %d local ranks"
                           % (local_rank, gpus, local_size))
    return True


def configure_devices(local_rank, local_size):
    """Pin one GPU per local rank (memory growth on); without GPUs, share the usable CPU cores (``usable_cores``)
    among local ranks.

    Returns "GPU" or "CPU". TF ≥ 1.14/2.x: ``tf.config.experimental.set_visible_devices``; TF 1.12/1.13: a
    Keras session whose ConfigProto has ``gpu_options.visible_device_list`` (Horovod's TF1 Keras examples).
    """
    cores = max(1, usable_cores() // max(1, local_size))
    if _has(tf, "config.experimental.list_physical_devices"):
        gpus = tf.config.experimental.list_physical_devices("GPU")
        if gpus:
            check_gpu_for_rank(local_rank, local_size, len(gpus))
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
            tf.config.experimental.set_visible_devices(gpus[local_rank], "GPU")
            return "GPU"
        if _has(tf, "config.threading.set_intra_op_parallelism_threads"):
            tf.config.threading.set_intra_op_parallelism_threads(cores)
            tf.config.threading.set_inter_op_parallelism_threads(max(2, cores))
        return "CPU"
    config = tf.ConfigProto()
    device = "CPU"
    if tf.test.is_built_with_cuda() and check_gpu_for_rank(local_rank, local_size, _gpu_count_from_driver()):
        config.gpu_options.allow_growth = True
        config.gpu_options.visible_device_list = str(local_rank)
        device = "GPU"
    else:
        config.intra_op_parallelism_threads = cores
        config.inter_op_parallelism_threads = max(2, cores)
    K.set_session(tf.Session(config=config))
    return device


def set_seed(seed):
    """Python's ``random``, NumPy's global stream and TensorFlow's graph-level seed: ``tf.random.set_seed`` (TF 2.x)
    or ``tf.set_random_seed`` (TF 1.x). Keras draws the seeds of unseeded initializers from Python's ``random``
    (Keras >= 2.7 ``backend.RandomGenerator``) or from the graph seed (older), so both fix the initial weights."""
    random.seed(seed)
    np.random.seed(seed)
    if _has(tf, "random.set_seed"):
        tf.random.set_seed(seed)
    else:
        tf.set_random_seed(seed)


def enable_op_determinism():
    """Turn on TensorFlow's op determinism (``tf.config.experimental.enable_op_determinism``, TF >= 2.9: the same
    inputs give bitwise the same outputs on one machine); returns False where it does not exist (TF < 2.9)."""
    fn = getattr(getattr(getattr(tf, "config", None), "experimental", None), "enable_op_determinism", None)
    if fn is None:
        return False
    fn()
    return True


def broadcast_from_rank0(array, name):
    """Rank 0's ``array`` on every rank (an allgather of every rank's copy, first block kept: the same bits on
    every rank)."""
    array = np.asarray(array)
    gathered = allgather(array.reshape((1,) + array.shape), name)
    return gathered[0]


# --- log noise -------------------------------------------------------------------------------------------------

#: Keras' "slow callback" warning for the batch-END hook, logged to the ``tensorflow`` logger: TF >= 2.2 "Callback
#: method `on_train_batch_end` is slow compared to the batch time (...)" (keras/src/callbacks.py,
#: ``CallbackList._call_batch_hook``), TF 1.13 … 2.1 "Method (on_train_batch_end) is slow compared to the batch
#: update (...)" (tensorflow/python/keras/callbacks.py).
SLOW_BATCH_END = re.compile(r"^(?:Callback method `|Method \()on_(?:train_)?batch_end(?:`|\)) is slow compared to "
                            r"the batch")
#: TF 1.12's tf.keras (Keras 2.1 callbacks) says it with ``warnings.warn`` instead: "Method on_batch_end() is slow
#: compared to the batch update (%f). Check your callbacks." (a UserWarning)
SLOW_BATCH_END_WARNING = r"Method on_batch_end\(\) is slow compared to the batch update"


class _DropSlowBatchEnd(logging.Filter):
    def filter(self, record):
        try:
            return not SLOW_BATCH_END.match(record.getMessage())
        except Exception:  # a record whose arguments do not format: keep it
            return True


def quiet_first_batch_broadcast_warning():
    """Drop Keras' "`on_train_batch_end` is slow" warning, and only it (``tensorflow`` logger; TF 1.12: Python
    warnings).

    Keras times the hooks of the first few batches; Horovod's ``BroadcastGlobalVariablesCallback`` broadcasts rank 0's
    variables in ``on_batch_end`` of the FIRST batch (horovod/_keras/callbacks.py), which takes longer than a
    step, so every run logged the warning although nothing is wrong. Our own hooks' cost per step is measured by
    ``bench/ratios/trainer_overhead.py``. Other log records, including the batch-begin variant, pass.
    """
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _DropSlowBatchEnd) for f in logger.filters):
        logger.addFilter(_DropSlowBatchEnd())
    warnings.filterwarnings("ignore", message=SLOW_BATCH_END_WARNING)


# --- tf.data and images ----------------------------------------------------------------------------------------

def autotune():
    """``tf.data.experimental.AUTOTUNE`` (TF 1.13+; ``tf.contrib.data.AUTOTUNE`` in 1.12), else a fixed count."""
    for path in ("data.experimental.AUTOTUNE", "data.AUTOTUNE"):
        obj = tf
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    contrib = getattr(getattr(tf, "contrib", None), "data", None)
    return getattr(contrib, "AUTOTUNE", None) or usable_cores()


def usable_cores():
    """The CPUs this process may run on (its affinity mask: a Slurm or container CPU limit), else all."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else max(1, os.cpu_count() or 1)


def ensure_shape(tensor, shape):
    """``tensor``, failing at run time unless its shape is ``shape`` (and known to be it): ``tf.ensure_shape``
    (TF >= 1.13), else ``tf.debugging.assert_equal`` on ``tf.shape`` then ``set_shape`` (TF 1.12)."""
    fn = getattr(tf, "ensure_shape", None)
    if fn is not None:
        return fn(tensor, shape)
    with tf.control_dependencies([tf.assert_equal(tf.shape(tensor), tf.constant(shape, tf.int32))]):
        tensor = tf.identity(tensor)
    tensor.set_shape(shape)
    return tensor


def group_by_window(dataset, key_func, reduce_func, window_size_func):
    """``dataset``'s elements grouped by ``key_func`` into windows of ``window_size_func(key)`` elements, each
    turned into a dataset by ``reduce_func(key, window)``; a window left short is emitted at the end of the input.
    TF >= 2.6: ``Dataset.group_by_window``; TF 1.13 … 2.5: ``tf.data.experimental.group_by_window``; TF 1.12:
    ``tf.contrib.data.group_by_window``."""
    method = getattr(dataset, "group_by_window", None)
    if method is not None:
        return method(key_func=key_func, reduce_func=reduce_func, window_size_func=window_size_func)
    module = getattr(tf.data, "experimental", None)
    fn = getattr(module, "group_by_window", None) or tf.contrib.data.group_by_window
    return dataset.apply(fn(key_func=key_func, reduce_func=reduce_func, window_size_func=window_size_func))


def ignore_errors(dataset, log=True):
    """Drop elements whose map raised (a PNG that fails to decode) instead of failing the run.

    TF ≥ 2.11: ``Dataset.ignore_errors(log_warning=log)`` logs each dropped element's error (``log=False``: a caller
    that names them itself); TF 1.13 … 2.10: ``tf.data.experimental.ignore_errors()``; TF 1.12:
    ``tf.contrib.data.ignore_errors()`` (these two never log).
    """
    method = getattr(dataset, "ignore_errors", None)
    if method is not None:
        return method(log_warning=log)
    experimental = getattr(tf.data, "experimental", None)
    fn = getattr(experimental, "ignore_errors", None) or tf.contrib.data.ignore_errors
    return dataset.apply(fn())


def read_file(path):
    fn = getattr(getattr(tf, "io", None), "read_file", None) or tf.read_file
    return fn(path)


def _antialias_resize():
    resize_v2 = getattr(tf.image, "resize", None)
    return resize_v2 is not None and "antialias" in _params(resize_v2)


def resize(image, size):
    """Antialiased resize to [size, size] (or [height, width] for a pair ``size``), float32:
    ``tf.image.resize(..., antialias=True)`` (bilinear with a widened kernel when shrinking; TF >= 2.0), else area
    averaging (``ResizeMethod.AREA``, TF 1.x: its ``resize_images`` has no ``antialias``). Without either,
    shrinking a 1024-pixel X-ray to 224 or 64 aliases. ``resize_method()`` names the one this TensorFlow uses.
    """
    shape = [size, size] if isinstance(size, numbers.Integral) else list(size)
    if _antialias_resize():
        return tf.image.resize(image, shape, antialias=True)
    return tf.image.resize_images(image, shape, method=tf.image.ResizeMethod.AREA)


def resize_method():
    """The name of the resize ``resize`` applies here (a prepared copy records it: ``trainer.prepared``)."""
    if _antialias_resize():
        return "tf.image.resize bilinear antialias=True"
    return "tf.image.resize_images AREA"


def numpy_function(fn, inputs, dtype, stateful=False):
    """``fn`` (NumPy arrays in, one array of ``dtype`` out) as a graph op: ``tf.numpy_function`` (TF >= 1.14,
    always stateful there: never folded or deduplicated), else ``tf.py_func`` (TF 1.12, 1.13; ``stateful`` as
    given: True for a side effect such as a clock). It holds the GIL while it runs: keep ``fn`` to a copy of
    memory."""
    fn_op = getattr(tf, "numpy_function", None)
    if fn_op is not None:
        return fn_op(fn, inputs, dtype)
    return tf.py_func(fn, inputs, dtype, stateful=stateful)


def without_injected_prefetch(dataset):
    """``dataset`` with tf.data's ``inject_prefetch`` optimization off where it exists (TF >= 2.11 turns it on: it
    puts a prefetch after the last map, which would then run ahead of the consumer); as it is elsewhere (TF 1.x
    injects none)."""
    options_class = getattr(tf.data, "Options", None)
    if options_class is None:
        return dataset
    options = options_class()
    optimization = getattr(options, "experimental_optimization", None)
    if optimization is None or not hasattr(optimization, "inject_prefetch"):
        return dataset
    optimization.inject_prefetch = False
    return dataset.with_options(options)


def transform_images(images, transforms):
    """Projective transform of each image: images float32 [B, H, W, C], transforms float32 [B, 8] (output pixel
    (x, y) samples the input at ((a0 x + a1 y + a2)/k, (b0 x + b1 y + b2)/k), k = c0 x + c1 y + 1); bilinear,
    zero outside the image.

    TF >= 2.3: ``tf.raw_ops.ImageProjectiveTransformV2`` (``fill_mode`` CONSTANT; the op behind Keras'
    RandomRotation); TF 1.x: ``tf.contrib.image.transform`` (the same op, zero fill).
    """
    raw = getattr(getattr(tf, "raw_ops", None), "ImageProjectiveTransformV2", None)
    if raw is not None:
        shape = tf.shape(images)[1:3]
        return raw(images=images, transforms=transforms, output_shape=shape, interpolation="BILINEAR",
                   fill_mode="CONSTANT")
    contrib = getattr(getattr(tf, "contrib", None), "image", None)
    if contrib is None:
        raise TrainerError("TensorFlow %s has neither tf.raw_ops.ImageProjectiveTransformV2 nor "
                           "tf.contrib.image: run with --rotation 0 --shift 0 --zoom 0 --no-hflip" % tf.__version__)
    return contrib.transform(images, transforms, interpolation="BILINEAR")


def random_uniform(shape, maxval):
    fn = getattr(getattr(tf, "random", None), "uniform", None) or tf.random_uniform
    return fn(shape, minval=0.0, maxval=maxval, dtype=tf.float32)


def iterate_numpy(dataset):
    """Yield the elements of a finite dataset as numpy values (eager iteration, or a one-shot iterator run in
    Keras' session under TF 1.x)."""
    if executing_eagerly():
        for element in dataset:
            yield tuple(np.asarray(t) for t in element)
        return
    make = getattr(getattr(tf.compat, "v1", None), "data", None) if hasattr(tf, "compat") else None
    if make is not None and hasattr(make, "make_one_shot_iterator"):
        next_element = make.make_one_shot_iterator(dataset).get_next()
    else:
        next_element = dataset.make_one_shot_iterator().get_next()
    session = K.get_session()
    while True:
        try:
            yield session.run(next_element)
        except tf.errors.OutOfRangeError:
            return


def training_mode_moments(probe, axes, prepare, input_shape):
    """A function numpy float32 [B, ...] (``input_shape``, batch dimension None) -> per output of ``probe`` the pair
    (mean, variance), numpy float32 vectors: the moments over ``axes[i]`` (a tuple of axis numbers) of output ``i``
    of ``probe(prepare(inputs))``, every layer in training mode (BatchNormalization normalises with the batch's own
    statistics). The variance is the biased one (divided by the count, ``tf.nn.moments``), as BatchNormalization
    normalises with. Only these small vectors leave the graph, never the activations.

    ``prepare``: tensor -> tensor, ``probe``'s input made from the function's input inside the graph.
    TF 2.x: one ``tf.function`` whose ``input_signature`` leaves the batch dimension open, so the last, shorter
    batch reuses the trace (https://www.tensorflow.org/guide/function#controlling_retracing); calling a Keras model
    with ``training=True`` also moves its BatchNorm moving averages, which the caller overwrites. TF 1.x:
    ``K.function`` over the moments with the learning phase fed 1 (no update op runs); ``probe`` is called on a
    placeholder, which adds a node to its layers.
    """
    shape = (None,) + tuple(input_shape[1:])
    if executing_eagerly():
        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
        def moments(inputs):
            return _moments(probe(prepare(inputs), training=True), axes)

        return lambda inputs: [(np.asarray(m), np.asarray(v)) for m, v in moments(tf.constant(inputs, tf.float32))]
    inputs = K.placeholder(shape=shape, dtype="float32")
    function = K.function([inputs, K.learning_phase()],
                          [t for pair in _moments(probe(prepare(inputs)), axes) for t in pair])

    def run(values):
        fetched = function([values, 1])
        return list(zip(fetched[0::2], fetched[1::2]))
    return run


def _moments(outputs, axes):
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [tuple(tf.nn.moments(tf.cast(o, tf.float32), list(a))) for o, a in zip(outputs, axes)]
