"""The Horovod CheXNet trainer: ``python -m trainer`` (options in ``trainer/cli.py``).

It runs inside the stack images, alone: Python 3.5 syntax, TensorFlow 1.12 … 2.15 (tf.keras), Horovod 0.15 …
0.28, and no import of other chexstack packages. Every framework-version difference lives in ``trainer.compat``.

Messages are ASCII (Python 3.5 in a C locale cannot print more to stdout); ``tests/test_py35.py`` checks the
syntax with vermin and that string literals outside docstrings are ASCII.

Modules, one job each:

- ``labels``      parse NIH's ``Data_Entry_2017*.csv[.gz]`` into 14-label vectors (CheXNet order)
- ``sources``     find the label file, the PNGs below a folder and the official split lists
- ``pngcheck``    O(1) structural check of each PNG (signature, IHDR, IEND)
- ``split``       official lists or a seeded patient-level train/val/test split
- ``data``        the above assembled into the examples of each split, with a report of what was left out
- ``prepared``    a prepared copy (uint8 shards + manifest): its layout, checks and the pipeline's loader of it
- ``prepare``     ``python -m trainer prepare``: one decode and resize of each labelled PNG into a prepared copy
- ``order``       each rank's batches and augmentation of epoch e, a function of (seed, e) (NumPy only)
- ``pipeline``    tf.data: decode, antialiased resize, the planned batches and their transforms, prefetch
- ``backbones``   the ``--model`` names and their smallest image size (no TensorFlow import)
- ``model``       ImageNet normalisation layer, DenseNet-121 / ResNet-50 / MobileNet, 14 sigmoid outputs
- ``loss``        class-weighted binary cross-entropy (CheXNet), and its value on pooled predictions
- ``recipe``      best epoch, LR decay on plateau, early stopping (replayable from metrics.json)
- ``baseline``    logistic regression on down-sampled pixels, on the same split
- ``evaluate``    ``python -m trainer evaluate``: score a saved model on any labelled set
- ``evaluation``  pooled predictions (allgather), per-pathology AUROC, patient-bootstrap intervals
- ``checkpoint``  atomic per-epoch checkpoint and resume
- ``runlock``     one run per output folder (an flock held for the whole run)
- ``outputs``     metrics.json, predictions.csv, test-predictions.csv, splits.csv, throughput.json
- ``callbacks``   Keras callbacks: step timing (images/s), rank-0 progress events
- ``events``      rank-0 log lines and machine-readable progress events for the launcher
- ``runtime``     Horovod set-up: init, device pinning, LR scaling, DistributedOptimizer, Horovod callbacks
- ``compat``      every TensorFlow / Keras / Horovod version difference
- ``train``       the training run; ``throughput`` the throughput run; ``cli`` the options (no TensorFlow import);
                  ``usage`` the usage errors (one ``trainer: error:`` line, exit 2); ``errors``; ``__main__`` starts
                  a run
"""
