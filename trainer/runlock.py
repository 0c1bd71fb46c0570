"""One run per output folder: an exclusive lock on ``OUTPUT/.chexstack.lock``, held for the whole run.

Two runs writing into one ``--output`` overwrite each other's metrics.json, predictions.csv, model.h5 and
checkpoint/. So whoever starts a run takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the lock file and keeps it open
until the run ends; the kernel drops the lock when the process ends, however it ends (no stale lock after a crash
or ``kill -9``). The file records the holder (pid, host, start time, command) for the next run's message.

Who takes it:

- ``invoke train`` (``launch.local``, ``launch.container``) on the host, before horovodrun starts; it writes a
  random token into the file and gives it to the ranks in ``CHEXSTACK_OUTPUT_LOCK``.
- The trainer's rank 0, at start, unless the lock is held under that token (its own launcher: on the host, or
  through the bind-mounted output folder of an in-image run — the same file, so the same lock). Other ranks wait
  for rank 0's verdict (``runtime.hold_output``).

So ``invoke train``, a bare ``horovodrun ... python -m trainer`` and a Slurm or Kubernetes job (rank 0 on a node,
output on a shared file system) all exclude each other. flock(2) works on local file systems and on NFS (Linux
emulates it with POSIX byte-range locks since 2.6.12: flock(2), "NFS details"); Lustre needs the ``flock`` mount
option (else ENOSYS). Where the file system cannot lock, the run goes on with a warning (``OutputLock.problem``).

The lock file lives only as long as the lock: ``release`` removes it while it still holds it, and the folder too
when this lock made it and the run wrote nothing else into it (a refusal after the lock was taken: data the trainer
cannot read, a rank's error at start), so such a run leaves no trace. So that removing it is safe, ``acquire`` keeps
a lock only when the file it locked is still the one at the path (a run that opened the file just before it was
removed locked a dead inode: it opens the path again). A run killed with SIGKILL leaves the file, unlocked: the
next run takes it.

Python 3.5, stdlib only: imported by the trainer in the images and by the host launcher.
"""
import errno
import fcntl
import json
import os
import socket
import time
import uuid

from trainer.errors import TrainerError

LOCK_FILE = ".chexstack.lock"
TOKEN_ENV = "CHEXSTACK_OUTPUT_LOCK"
#: errno values of file systems that cannot lock (Lustre without -o flock: ENOSYS; some FUSE/SMB mounts)
_NO_LOCKING = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)
#: How often ``acquire`` opens the path again after locking a removed lock file
_ATTEMPTS = 10


class OutputInUse(TrainerError):
    """Another run holds the lock; ``holder`` is what it recorded (a dict, maybe empty)."""

    def __init__(self, message, holder):
        super(OutputInUse, self).__init__(message)
        self.holder = holder


class OutputLock(object):
    """A held lock (``problem`` None), or a folder whose file system cannot lock (``problem`` says so)."""

    def __init__(self, folder, handle, token, problem=None, created=False):
        self.folder = folder
        self.handle = handle
        self.token = token
        self.problem = problem
        self.created = created  # this lock made the folder

    def release(self):
        """Remove the lock file and drop the lock; the folder too when ``acquire`` made it and nothing else is in it
        (a run that wrote nothing leaves the file system as it found it)."""
        if self.handle is not None:
            _remove_quietly(os.remove, path_of(self.folder))  # still held: nobody can take the lock meanwhile
            if self.created:
                _remove_quietly(os.rmdir, self.folder)  # only an empty folder: fails harmlessly otherwise
            self.handle.close()  # closing the last descriptor drops the flock
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def path_of(folder):
    return os.path.join(folder, LOCK_FILE)


def _remove_quietly(remove, path):
    try:
        remove(path)
    except OSError:
        pass


def _still_at(handle, path):
    """Whether the open ``handle`` is the file at ``path`` now (not one a released run removed)."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except OSError:
        return False


def check_output_folder(folder, option="--output"):
    """Raise a TrainerError unless ``folder`` is a folder, or can be created, that this process can write in.

    Looks only (creates nothing): the folder or its nearest existing parent must be a directory with write and
    search permission (``os.access``, which also reports a read-only file system).
    """
    folder = os.path.abspath(folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise TrainerError("%s %s is a file, not a folder" % (option, folder))
    probe = folder
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise TrainerError("%s %s: cannot create it, %s is a file" % (option, folder, probe))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise TrainerError("%s %s: cannot write in %s (read-only file system or no permission)"
                           % (option, folder, probe))


def _make_folder(folder, option):
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder)
    except OSError as e:
        if not os.path.isdir(folder):
            raise TrainerError("%s %s: cannot create the folder (%s)" % (option, folder, e.strerror or e))


def _open(path, option, folder):
    """The lock file opened for writing (created if missing), or read-only when another user's file is there."""
    try:
        return os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o666), "r+")
    except (IOError, OSError) as e:
        if e.errno in (errno.EACCES, errno.EPERM) and os.path.exists(path):
            try:
                return open(path, "r")
            except (IOError, OSError):
                pass
        raise TrainerError("%s %s: cannot write the lock file %s (%s)" % (option, folder, path, e.strerror or e))


def read_holder(folder):
    """What the holder of ``folder``'s lock recorded (a dict; empty when nothing readable is there)."""
    try:
        with open(path_of(folder)) as f:
            value = json.loads(f.read() or "{}")
    except (IOError, OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def describe(holder):
    """``pid 123 on host node1, started 2024-05-01 10:00:00 UTC: invoke train ...`` (or a placeholder)."""
    if not holder.get("pid"):
        return "no details recorded"
    text = "pid %s on host %s, started %s" % (holder.get("pid"), holder.get("host", "?"), holder.get("started", "?"))
    return text + (": %s" % holder["command"] if holder.get("command") else "")


def _in_use(folder, option):
    holder = read_holder(folder)
    return OutputInUse("%s %s is in use by another run (%s); wait for it to end, or choose another %s"
                       % (option, folder, describe(holder), option), holder)


def check_free(folder, option="--output"):
    """Raise OutputInUse when another process holds ``folder``'s lock; creates and changes nothing (no lock file:
    free; a file system that cannot lock: left to ``acquire`` to say). A check before a command writes anything
    into ``folder``; ``acquire`` still decides."""
    folder = os.path.abspath(folder)
    try:
        handle = open(path_of(folder), "r")
    except (IOError, OSError):
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (IOError, OSError) as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _in_use(folder, option)
    finally:
        handle.close()


def acquire(folder, command, option="--output"):
    """Create ``folder`` if needed and lock it for this process; returns an OutputLock.

    Raises OutputInUse when another run holds the lock, TrainerError when the folder or lock file cannot be
    made. The lock is released by ``release()`` or when the process ends.
    """
    folder = os.path.abspath(folder)
    check_output_folder(folder, option)
    path = path_of(folder)
    for _ in range(_ATTEMPTS):
        created = not os.path.isdir(folder)
        _make_folder(folder, option)
        try:
            handle = _open(path, option, folder)
        except TrainerError:
            if os.path.isdir(folder):
                raise
            continue  # a released run removed the folder it had made: make it again
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as e:
            handle.close()
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _in_use(folder, option)
            if e.errno in _NO_LOCKING:
                return OutputLock(folder, None, None, problem=(
                    "%s %s: this file system cannot lock %s (%s), so nothing stops a second run from writing into "
                    "the same folder; make sure no other run uses it" % (option, folder, LOCK_FILE, e.strerror or e)))
            raise TrainerError("%s %s: cannot lock %s (%s)" % (option, folder, path, e.strerror or e))
        if _still_at(handle, path):
            break
        handle.close()  # locked a file a released run had just removed: open the path again
    else:
        raise TrainerError("%s %s: the lock file %s kept being removed and made again (%d tries): another process "
                           "is starting and ending runs in this folder" % (option, folder, path, _ATTEMPTS))
    token = uuid.uuid4().hex
    if "+" in handle.mode:
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                 "token": token}, sort_keys=True) + "\n")
        handle.flush()
    return OutputLock(folder, handle, token, created=created)


def acquire_unless_held_for_us(folder, command, option="--output"):
    """Rank 0's lock: ``acquire``, except when the holder is this run's launcher (its token is in
    ``CHEXSTACK_OUTPUT_LOCK``): then None — the launcher holds it for the whole run."""
    try:
        return acquire(folder, command, option)
    except OutputInUse as e:
        token = os.environ.get(TOKEN_ENV)
        if token and e.holder.get("token") == token:
            return None
        raise
