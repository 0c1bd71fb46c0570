"""Where the data is: the label file, the PNGs and the official split lists under a folder.

NIH ships ChestX-ray14 as ``Data_Entry_2017*.csv``, ``train_val_list.txt``, ``test_list.txt`` and twelve
``images_0NN/images/*.png`` folders (https://nihcc.app.box.com/v/ChestXray-NIHCC, README_CHESTXRAY.pdf); copies
also come flattened into one ``images/`` folder. Both layouts work: PNGs are found anywhere below the folder and
joined to the label file by file name, so one name must not occur twice.
"""
import glob
import os

from trainer.errors import TrainerError

#: ``--data synthetic``: random images and labels instead of files.
SYNTHETIC = "synthetic"
LABEL_PATTERNS = ("Data_Entry_2017*.csv", "Data_Entry_2017*.csv.gz")
TRAIN_VAL_LIST = "train_val_list.txt"
TEST_LIST = "test_list.txt"


def check_folder(path, option):
    """TrainerError unless ``path`` is a folder: a file there is called a file, a missing path missing."""
    if os.path.isfile(path):
        raise TrainerError("%s %s: is a file; expected a folder" % (option, path))
    if not os.path.isdir(path):
        raise TrainerError("%s %s: no such directory" % (option, path))


def find_label_file(data_dir):
    """The one ``Data_Entry_2017*.csv[.gz]`` directly in ``data_dir``."""
    check_folder(data_dir, "--data")
    found = sorted(set(p for pattern in LABEL_PATTERNS for p in glob.glob(os.path.join(data_dir, pattern))))
    if not found:
        raise TrainerError("--data %s: no label file %s in it (give it with --images DIR --labels FILE)"
                           % (data_dir, " or ".join(LABEL_PATTERNS)))
    if len(found) > 1:
        raise TrainerError("--data %s: %d label files (%s); choose one with --images DIR --labels FILE"
                           % (data_dir, len(found), ", ".join(os.path.basename(p) for p in found)))
    return found[0]


def index_images(images_dir, option="--images"):
    """Map every ``*.png`` file name below ``images_dir`` to its path.

    A name found twice is an error naming both paths: which copy is meant is not ours to guess.
    """
    check_folder(images_dir, option)
    index = {}
    for root, dirs, files in os.walk(images_dir, followlinks=True):
        dirs.sort()
        for name in files:
            if not name.lower().endswith(".png"):
                continue
            path = os.path.join(root, name)
            if name in index:
                raise TrainerError("%s %s: image %s found twice: %s and %s; point --images at the folder that "
                                   "holds the copy you mean" % (option, images_dir, name, index[name], path))
            index[name] = path
    return index


def find_split_lists(data_dir):
    """(train_val_list path or None, test_list path or None) directly in ``data_dir``."""
    paths = []
    for name in (TRAIN_VAL_LIST, TEST_LIST):
        path = os.path.join(data_dir, name)
        paths.append(path if os.path.isfile(path) else None)
    return tuple(paths)


def read_name_list(path):
    """The image names in a split list (one per line, blank lines ignored)."""
    try:
        with open(path, "r") as f:
            return [line.strip() for line in f if line.strip()]
    except (IOError, OSError) as e:
        raise TrainerError("cannot read split list %s: %s" % (path, e))
