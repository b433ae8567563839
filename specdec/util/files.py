"""Files and folders written all-or-nothing, a lock for read-modify-write, and the folder where built tables
are cached between processes.

Every writer in the package goes through `atomic_path` (or `write_atomic` for text): the data lands in a
temporary file in the destination's folder, then one rename puts it in place, so an interrupt or a crash
leaves either the old file or the new one, never half of one. A folder that must hold one run's files
(a report, an exported model) is built beside its place and swapped in whole (`swap_folder`); a shared file
that several processes update (the machine record) is read and rewritten under `locked`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def cache_dir() -> Path:
    """Where built tables are kept between processes: $SPECDEC_CACHE, else ~/.cache/specdec."""
    return Path(os.environ.get("SPECDEC_CACHE") or Path.home() / ".cache" / "specdec")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; on a clean exit it is renamed onto `path`, on any
    exception (KeyboardInterrupt included) it is removed and `path` is untouched. The temporary name keeps
    the suffix, so writers that pick a format by suffix (matplotlib's savefig) still do."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write one text (or bytes) file all-or-nothing."""
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data)


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock (flock on `path`.lock) while the block runs: two processes that read, modify and
    rewrite `path` under it take turns, so neither loses the other's change. The lock file stays (removing it
    would let a third process lock a fresh file while the second holds the old one)."""
    import fcntl  # POSIX only: imported here so that the rest of this module loads anywhere

    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


AT_FDCWD = -100  # renameat2's "relative to the working directory"
RENAME_EXCHANGE = 2  # renameat2's flag: swap the two paths in one step


def _exchange(a: Path, b: Path) -> bool:
    """Swap folders a and b in one atomic step (Linux renameat2); False where the OS or libc cannot."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    return fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0


def _folder_mode(folder: Path) -> int:
    """The permissions `folder` has, or a new folder would get under the umask."""
    if folder.exists():
        return folder.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def swap_folder(new: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Put the complete folder `new` (a sibling of `folder`, same file system) where `folder` is, then remove
    the old one. On Linux the two swap in one step, so `folder` is never missing or mixed; elsewhere the old
    one is renamed aside first, and a crash between the two renames leaves it beside `folder`, whole."""
    new, folder = Path(new), Path(folder)
    os.chmod(new, _folder_mode(folder))  # mkdtemp made it private (0700); it takes the place of a normal folder
    if not folder.exists():
        os.replace(new, folder)
        return
    if _exchange(new, folder):
        shutil.rmtree(new)  # now the old folder
        return
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-old-"))
    os.replace(folder, aside / folder.name)
    os.replace(new, folder)
    shutil.rmtree(aside)
