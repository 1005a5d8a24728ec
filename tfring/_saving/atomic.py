"""Writing files so that a reader never sees a partial one.

Every writer here writes under a temporary name in the destination's directory, flushes it
to disk (fsync), then renames it into place (``os.replace``, atomic on POSIX within one
file system). A process killed while saving leaves the previous version intact and a
``.<name>.tmp-*`` leftover, never a truncated file under the real name.

Remote paths (``scheme://...``) cannot be renamed atomically: they are written in place, as
is a path whose directory cannot be created (the writer then fails as in one process). An
error raised while writing names the destination, never the temporary name.

Blocking: plain file I/O on the calling thread. Not thread-safe for one destination.
"""

import errno
import glob
import os
import shutil
import tempfile

_DOUBLE_SUFFIXES = (".weights.h5",)

# Test hook: called with the destination just before the first rename into place (the
# temporary files are complete). tests/workers/checkpoint_script.py kills the process there.
before_rename = None


def _suffix(path):
    base = os.path.basename(path)
    for s in _DOUBLE_SUFFIXES:
        if base.endswith(s):
            return s
    return os.path.splitext(base)[1]


def is_remote(path):
    return "://" in os.fspath(path)


def fsync_path(path):
    """fsync a file or directory; errors (e.g. a file system without fsync) are ignored."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(filepath, suffix, make_folder=True):
    """A fresh temporary name next to ``filepath``. ``make_folder``: create ``filepath``'s
    folder first (TF's checkpoint and SavedModel writers do in one process); without it a
    missing folder raises FileNotFoundError (Keras' file writers do not create it)."""
    directory = os.path.dirname(filepath) or "."
    if make_folder:
        os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(filepath)}.tmp-", suffix=suffix, dir=directory)
    os.close(fd)
    os.remove(tmp)  # writers (Keras, h5py, TF) want to create it themselves
    return tmp


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _name_the_destination(exc, tmp, filepath):
    """Puts the user's ``filepath`` where ``exc``'s message names the temporary ``tmp``
    (Keras: "Received: filepath=/d/.m.tmp-x1y2."), so the error reads as in one process."""
    def fix(value):
        return value.replace(tmp, filepath) if isinstance(value, str) else value

    try:
        exc.args = tuple(fix(a) for a in exc.args)
        for attribute in ("filename", "filename2", "_message"):  # OSError, tf.errors.OpError
            if isinstance(getattr(exc, attribute, None), str):
                setattr(exc, attribute, fix(getattr(exc, attribute)))
    except (AttributeError, TypeError):  # an exception that refuses new attributes
        pass


def _temp_or_none(filepath, suffix, make_folder=True):
    """A temporary path next to ``filepath``, or None when its directory cannot be made
    (a parent that is a file, no permission) or, without ``make_folder``, does not exist:
    the caller then hands ``filepath`` itself to the writer, which fails (or succeeds) as
    in one process."""
    try:
        return _temp_name(filepath, suffix, make_folder)
    except OSError:
        return None


def _announce(filepath):
    if before_rename is not None:
        before_rename(filepath)


def atomic_write(filepath, write):
    """Calls ``write(tmp_path)`` for a fresh temporary path next to ``filepath`` (same
    suffix, which Keras checks), then atomically renames it to ``filepath``. On any error the
    temporary file is removed and the error re-raised; ``filepath`` is untouched. A missing
    folder is not created (Keras' writers, the callers, do not create it in one process)."""
    filepath = os.fspath(filepath)
    tmp = None if is_remote(filepath) else _temp_or_none(filepath, _suffix(filepath), make_folder=False)
    if tmp is None:
        write(filepath)
        return
    try:
        write(tmp)
        fsync_path(tmp)
        _announce(filepath)
        os.replace(tmp, filepath)
    except BaseException as e:
        _remove(tmp)
        _name_the_destination(e, tmp, filepath)
        raise
    fsync_path(os.path.dirname(filepath) or ".")


def atomic_write_checkpoint(prefix, write):
    """A TF checkpoint (``prefix.index`` + ``prefix.data-*``) written by ``write(tmp_prefix)``
    under a temporary prefix, then moved into place: data files first, the index LAST (TF
    finds a checkpoint by its index, so it is never seen half-moved). An older checkpoint
    under the same prefix loses its index first, so its index never names the new data."""
    prefix = os.fspath(prefix)
    tmp = None if is_remote(prefix) else _temp_or_none(prefix, "")
    if tmp is None:
        write(prefix)
        return
    try:
        write(tmp)
        produced = sorted(glob.glob(glob.escape(tmp) + ".*"))
        for path in produced:
            fsync_path(path)
        _announce(prefix)
        if os.path.exists(prefix + ".index"):
            os.remove(prefix + ".index")
        index = tmp + ".index"
        for path in produced:
            if path != index:
                os.replace(path, prefix + path[len(tmp):])
        if os.path.exists(index):
            os.replace(index, prefix + ".index")
    except BaseException as e:
        for path in glob.glob(glob.escape(tmp) + "*"):
            _remove(path)
        _name_the_destination(e, tmp, prefix)
        raise
    fsync_path(os.path.dirname(prefix) or ".")


def atomic_write_directory(path, write):
    """A directory (a SavedModel) written by ``write(tmp_dir)``, then renamed into place;
    an existing directory there is first renamed aside and removed after the swap."""
    path = os.fspath(path).rstrip(os.sep) or os.sep
    tmp = None if is_remote(path) else _temp_or_none(path, "")
    if tmp is None:
        write(path)
        return
    olds = []  # directories this call moved aside, removed once its own is in place
    try:
        write(tmp)
        for root, _, files in os.walk(tmp):
            for name in files:
                fsync_path(os.path.join(root, name))
        _announce(path)
        _swap_in_directory(tmp, path, olds)
    except BaseException as e:
        _remove(tmp)
        if olds and not os.path.lexists(path):
            os.replace(olds.pop(), path)
        _name_the_destination(e, tmp, path)
        raise
    finally:
        for old in olds:
            _remove(old)
    fsync_path(os.path.dirname(path) or ".")


def _swap_in_directory(tmp, path, olds, attempts=20):
    """Renames ``tmp`` to ``path``, moving whatever is at ``path`` aside into ``olds``.
    Another process may put its own copy at ``path`` between the two renames (two ranks
    saving the same checkpoint): then this one moves that aside too and tries again, so the
    last writer's complete copy wins and neither fails with "Directory not empty"."""
    for attempt in range(attempts):
        if os.path.lexists(path):
            old = _temp_name(path, ".old")
            try:
                os.replace(path, old)
                olds.append(old)
            except FileNotFoundError:  # the other writer moved it aside first
                pass
        try:
            os.replace(tmp, path)
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or attempt == attempts - 1:
                raise
