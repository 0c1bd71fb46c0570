"""``python -m trainer evaluate``: score a saved model on any labelled set of images, with Horovod ranks or one
process.

    python -m trainer evaluate --model runs/x/model-best.h5 --images DIR --labels FILE [--list FILE] [--split S]
        [--output DIR]

Every labelled image below ``--images`` (restricted to the names in ``--list``, e.g. NIH's ``test_list.txt``, or to
one split of the run that trained the model, ``--split test``: ``names_to_score``) is scored: each rank predicts
every ``size``-th row, predictions are pooled, and rank 0 writes ``evaluation.json`` (the ``test`` block of a
training run's metrics.json: per-pathology AUROC with 95 % patient-bootstrap intervals and positives, plus the
model's and label file's SHA-256) and ``predictions.csv`` to ``--output``. The image size
is the model's input size; the model normalises its own input (``trainer.model``).

``--output`` must not be a training run's folder (``check_output``): the evaluation's ``predictions.csv`` would
replace the run's validation predictions, from which its AUROCs are recomputed. ``--output RUN/evaluation`` keeps
the result beside the run. Nor may it hold the evaluation of another model, label file, list or split (the default
``runs/evaluate`` after an earlier evaluation): that one would be replaced; the same inputs again replace their
own.
"""
import os
from collections import OrderedDict

from trainer import checkpoint, events, labels, outputs, pngcheck, runlock, sources
from trainer.data import Subset
from trainer.errors import TrainerError
from trainer.split import SPLITS
from trainer.usage import Parser, reporting_errors

EVALUATION = "evaluation.json"
#: the bootstrap's defaults when the run's own are not known (those of ``python -m trainer``: ``trainer.cli``)
SEED, BOOTSTRAP = 0, 1000


def parser():
    p = Parser(prog="python -m trainer evaluate", description="Score a saved chexstack model on labelled images.")
    p.add_argument("--model", required=True, metavar="PATH", help="model.h5 or model-best.h5 of a training run")
    p.add_argument("--images", required=True, metavar="DIR", help="folder with the PNGs (searched recursively)")
    p.add_argument("--labels", required=True, metavar="FILE", help="label file Data_Entry_2017*.csv or .csv.gz")
    p.add_argument("--list", metavar="FILE", help="score only the image names in FILE (e.g. test_list.txt); with "
                                                  "--split, a run's splits.csv")
    p.add_argument("--split", choices=SPLITS, help="score only this split of the run that trained --model (its "
                                                   "splits.csv beside the model, or --list RUN/splits.csv)")
    p.add_argument("--output", default="runs/evaluate", metavar="DIR")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--bootstrap", type=int, help="patient resamples for the intervals (0: none; default: with "
                                                 "--split the run's own, else %d)" % BOOTSTRAP)
    p.add_argument("--seed", type=int, help="the bootstrap's seed (default: with --split the run's own, else %d)"
                                            % SEED)
    return p


def check_output(output, model=None, label_file=None, list_file=None, split=None):
    """TrainerError when the folder ``output`` holds a training run (its metrics.json or checkpoint/state.json),
    naming the run's file this evaluation would overwrite; or, given this evaluation's ``model``, ``label_file``,
    ``list_file`` and ``split``, when it holds the evaluation of other inputs (its evaluation.json names another
    model file content, label file content, list or split): this one would replace it. The same inputs again are
    scored again (the same numbers for the same seed) and replace it. TF-free: the host checks it before it starts
    a rank."""
    marks = [path for path in (os.path.join(output, outputs.METRICS),
                               os.path.join(checkpoint.folder(output), checkpoint.STATE)) if os.path.isfile(path)]
    if marks:
        predictions = os.path.join(output, outputs.PREDICTIONS)
        would = ("would overwrite the run's validation predictions %s" % predictions if os.path.exists(predictions)
                 else "would be written as the run's %s" % predictions)
        raise TrainerError("--output %s holds a training run (%s): this evaluation's %s %s; choose another "
                           "--output, e.g. %s" % (output, marks[0], outputs.PREDICTIONS, would,
                                                 os.path.join(output, "evaluation")))
    if model is not None:
        _check_earlier_evaluation(output, model, label_file, list_file, split)


def _check_earlier_evaluation(output, model, label_file, list_file, split):
    path = os.path.join(output, EVALUATION)
    earlier = outputs.read_json(path)
    if earlier is None or not os.path.isfile(model):  # a missing model is named by the option checks
        return
    if not isinstance(earlier, dict):
        raise TrainerError("%s: not an evaluation (expected a JSON object): this evaluation would replace it; "
                           "choose another --output" % path)
    other = []
    if earlier.get("model_sha256") != outputs.file_sha256(model):
        other.append("model (%s, SHA-256 %s%s)" % (earlier.get("model"), earlier.get("model_sha256"),
                                                   _changed_since(earlier.get("model"), model)))
    if (label_file is not None and os.path.isfile(label_file)
            and earlier.get("label_sha256") != labels.read_text(label_file)[1]):
        other.append("label file (%s, SHA-256 %s%s)" % (earlier.get("label_file"), earlier.get("label_sha256"),
                                                        _changed_since(earlier.get("label_file"), label_file)))
    if earlier.get("list") != (os.path.abspath(list_file) if list_file else None):
        other.append("--list (%s)" % (earlier.get("list") or "none: every labelled image"))
    if earlier.get("split") != split:
        other.append("--split (%s)" % (earlier.get("split") or "none"))
    if other:
        run_name = os.path.basename(os.path.dirname(os.path.abspath(model))) or "other"
        raise TrainerError("--output %s holds the evaluation of another %s (%s): this evaluation would replace it "
                           "and its %s; choose another --output, e.g. %s"
                           % (output, " and ".join(other), path, outputs.PREDICTIONS, os.path.join(output, run_name)))


def _changed_since(earlier_path, path):
    """``", the same path: the file changed since"`` when the earlier evaluation read the file at ``path`` itself,
    else ``""``."""
    same = earlier_path and os.path.abspath(earlier_path) == os.path.abspath(path)
    return ", the same path: the file changed since" if same else ""


def names_to_score(options):
    """(the image names to score, what they are, in words; the splits.csv read or None): every labelled image
    (None, ...), the names in ``--list`` (one a line), or with ``--split S`` the images of split S in the splits.csv
    of the run that trained ``--model`` (``outputs.splits_beside``; or ``--list RUN/splits.csv``). TrainerError:
    ``--split`` without a splits.csv beside the model, a ``--list`` given with ``--split`` that is not a
    splits.csv, a split with no image in it, or a splits.csv given as ``--list`` without ``--split`` (its lines
    are not image names: say which split)."""
    if options.split is None:
        if options.list is None:
            return None, "every labelled image", None
        if outputs.is_splits_file(options.list):
            raise TrainerError("--list %s is a run's splits.csv (%s), not a list of image names: add --split test "
                               "(or train, val) to score one of its splits"
                               % (options.list, ",".join(outputs.SPLITS_HEADER)))
        return sources.read_name_list(options.list), "the names in --list %s" % options.list, None
    path = options.list or outputs.splits_beside(options.model)
    if path is None:
        raise TrainerError("--split %s: no %s beside --model %s (nor in its parent folder): --split scores a split "
                           "of the run that trained the model, as its splits.csv records it; give a model of that "
                           "run's folder, or --list RUN/%s --split %s" % (options.split, outputs.SPLITS, options.model,
                                                                            outputs.SPLITS, options.split))
    names = outputs.split_names(path, options.split)
    if not names:
        raise TrainerError("--split %s: %s has no %s image (the run's --%s-fraction was 0?)" % (
            options.split, path, options.split, options.split))
    return names, "the %s split of %s" % (options.split, path), path


def _bootstrap_settings(options, splits_path):
    """``options`` with ``--seed`` and ``--bootstrap`` filled in where not given: from the run's own test block
    (``metrics.json`` beside ``splits_path``, its ``test.bootstrap``) with ``--split``, so ``--split test`` gives the
    run's own intervals; else ``SEED`` and ``BOOTSTRAP``."""
    run = {}
    if splits_path is not None:
        metrics = outputs.read_json(os.path.join(os.path.dirname(splits_path), outputs.METRICS))
        test = metrics.get("test") if isinstance(metrics, dict) else None
        run = test.get("bootstrap") or {} if isinstance(test, dict) else {}
    if options.seed is None:
        options.seed = run.get("seed", SEED) if isinstance(run.get("seed"), int) else SEED
    if options.bootstrap is None:
        options.bootstrap = run.get("resamples") if isinstance(run.get("resamples"), int) else BOOTSTRAP
    return options


def rows(options):
    """The Subset to score: labelled images below ``--images`` that pass the PNG check (and are among
    ``names_to_score``)."""
    table = labels.read_label_file(options.labels)
    on_disk = sources.index_images(options.images)
    names, what, _ = names_to_score(options)
    wanted = set(names) if names is not None else None
    keep = [i for i, n in enumerate(table.names) if n in on_disk and (wanted is None or n in wanted)]
    if options.split is not None and 0 < len(keep) < len(wanted):
        events.warn("%d of the %d images of %s are not labelled images below --images %s: the other %d are scored"
                    % (len(wanted) - len(keep), len(wanted), what, options.images, len(keep)))
    problems = pngcheck.find_problems([on_disk[table.names[i]] for i in keep])
    if problems:
        events.warn("%d image files failed the PNG check and are not scored: %s"
                    % (len(problems), "; ".join("%s (%s)" % (on_disk[table.names[keep[k]]], r)
                                                for k, r in sorted(problems.items())[:20])))
    keep = [i for k, i in enumerate(keep) if k not in problems]
    if not keep:
        raise TrainerError("no labelled image to score below --images %s%s" % (
            options.images, " among %s" % what if names is not None else ""))
    return Subset([table.names[i] for i in keep], [on_disk[table.names[i]] for i in keep], table.labels[keep],
                  [table.patients[i] for i in keep]), table.sha256


def run(options):
    import tensorflow as tf

    from trainer import compat, evaluation, pipeline, runtime
    from trainer.train import predict_pooled
    rt = runtime.start(options.seed)
    runtime.hold_output(rt, options.output)
    subset, label_sha256 = rows(options)
    seen = _seen_in_training(options.model, subset.names)
    try:
        model = tf.keras.models.load_model(options.model, compile=False, custom_objects=compat.SAVED_LAYERS)
    except (IOError, OSError, ValueError) as e:
        raise TrainerError("--model %s: not a readable Keras model (%s)" % (options.model, " ".join(str(e).split())))
    image_size = int(model.input_shape[1])
    indices, scores = predict_pooled(rt, model, subset, options.batch_size, pipeline.png_loader(image_size), "eval")
    if not rt.chief:
        return 0
    indices, scores, missing = evaluation.order_rows(indices, scores, len(subset))
    y = subset.labels[indices]
    outputs.write_predictions(options.output, [subset.names[i] for i in indices], y, scores)
    block = evaluation.held_out_block(y, scores, [subset.patients[i] for i in indices], options.bootstrap,
                                      options.seed, len(subset), [subset.paths[i] for i in missing])
    few = evaluation.few_cases(block)
    result = OrderedDict([
        ("model", os.path.abspath(options.model)), ("model_sha256", outputs.file_sha256(options.model)),
        ("image_size", image_size), ("label_file", os.path.abspath(options.labels)), ("label_sha256", label_sha256),
        ("list", os.path.abspath(options.list) if options.list else None), ("split", options.split),
        ("world_size", rt.size),
        ("images_seen_in_training", seen), ("few_cases", few), ("test", block)])
    outputs.write_json(os.path.join(options.output, EVALUATION), result)
    events.emit("evaluate", mean_auroc=block["mean_auroc"], n_images=block["n_images"],
                auroc=OrderedDict((k, v["auroc"]) for k, v in block["auroc"].items()), output=options.output)
    for name, entry in block["auroc"].items():
        events.info("%-20s AUROC %s  95%% CI %s  positives %d" % (
            name, "undefined" if entry["auroc"] is None else "%.3f" % entry["auroc"],
            "-" if entry["ci_low"] is None else "%.3f-%.3f" % (entry["ci_low"], entry["ci_high"]),
            entry["n_positive"]))
    if few["warning"]:
        events.warn(few["warning"])
    events.info(summary_line(block, options.output, seen, few))
    return 0


def summary_line(block, output, seen=None, few=None):
    """The evaluation in one line, the last one it prints (the one people copy): mean AUROC with its bootstrap
    interval, over how many pathologies, images and patients, how many of those images the model's run trained or
    validated on (``seen``, ``images_seen_in_training``: said when above 0, so a copied result never passes for a
    held-out one), whether it rests on too few cases to mean much (``few``, ``trainer.evaluation.few_cases``'s:
    how many AUROCs come from fewer than its minimum of positives or negatives, fewer patients than it), and where
    the files are. ``block``: ``trainer.evaluation.held_out_block``'s."""
    mean = block["mean_auroc"]
    interval = ("" if block.get("mean_auroc_ci_low") is None else
                " (95%% CI %.3f-%.3f)" % (block["mean_auroc_ci_low"], block["mean_auroc_ci_high"]))
    caveats = ["%d of them seen in training" % seen] if seen else []
    if few and few["warning"]:
        said = (["%d of %d AUROCs from fewer than %d positives or negatives" % (
            len(few["pathologies"]), block["n_classes_defined"], few["minimum"])] if few["pathologies"] else [])
        said += ["fewer than %d patients" % few["minimum"]] if few["few_patients"] else []
        caveats.append("too few cases to mean much: %s" % ", ".join(said))
    caveat = " (%s)" % "; ".join(caveats) if caveats else ""
    return "mean AUROC %s%s over %d of %d pathologies, %d images of %d patients%s; %s and %s in %s" % (
        "undefined" if mean is None else "%.4f" % mean, interval, block["n_classes_defined"], len(block["auroc"]),
        block["n_images"], block["n_patients"], caveat, EVALUATION, outputs.PREDICTIONS, output)


def _seen_in_training(model, names):
    """How many of ``names`` the run that saved ``model`` trained or validated on (its splits.csv), warned; None
    when no splits.csv is beside the model."""
    seen, path = outputs.trained_on(model)
    if seen is None:
        return None
    count = sum(1 for name in names if name in seen)
    if count:
        events.warn("%d of the %d images scored were in the model's training or validation split (%s): this AUROC "
                    "is not a held-out one; score held-out images with --split test (the run's test split) or "
                    "--list FILE (e.g. NIH's test_list.txt)" % (count, len(names), path))
    return count


def parse(argv):
    """The options of ``python -m trainer evaluate ARGV`` (``argv`` without the word ``evaluate``), not yet checked
    (``check``). UsageError (a TrainerError) for an unknown option, a missing required one or a wrong type."""
    return parser().parse_args(list(argv))


def check(options):
    """``options`` (``parse``) when an evaluation of them can start here; TrainerError naming the first problem
    otherwise: ``--batch-size`` below 1 or ``--bootstrap`` negative; ``--model``, ``--labels`` or ``--list`` not a
    file (a folder there is called a folder, a missing path missing); ``--images`` not a folder; ``--output`` a
    file, or a folder this process cannot create or write in (``runlock.check_output_folder``), or one holding a
    training run or another evaluation (``check_output``); ``--split`` or ``--list`` that ``names_to_score``
    refuses. Fills in ``--seed`` and ``--bootstrap`` (``_bootstrap_settings``). TF-free and reading no image: the
    host checks the same (``trainer.preflight.check_evaluate``) before it starts one process or ``--np`` ranks, so
    every world size refuses these alike; what only a rank can find (no labelled image among the names, a model
    file Keras cannot read) is its refusal, which the host shows as one line too (``launch.evaluate``)."""
    if options.batch_size < 1 or (options.bootstrap or 0) < 0:
        raise TrainerError("--batch-size must be at least 1 and --bootstrap not negative")
    for option, path in (("--model", options.model), ("--labels", options.labels), ("--list", options.list)):
        if path is not None and not os.path.isfile(path):
            raise TrainerError("%s %s: %s" % (option, path, "is a folder; expected a file" if os.path.isdir(path)
                                                            else "no such file"))
    sources.check_folder(options.images, "--images")
    _, _, splits_path = names_to_score(options)
    runlock.check_output_folder(options.output)
    check_output(options.output, options.model, options.labels, options.list, options.split)
    return _bootstrap_settings(options, splits_path)


def _run(argv):
    return run(check(parse(argv)))


def main(argv=None):
    return reporting_errors(lambda: _run(argv), "python -m trainer evaluate")
