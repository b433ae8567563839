"""Files written all-or-nothing, and the folder where built tables are cached between processes.

Every writer in the package goes through `atomic_path` (or `write_atomic` for text): the data lands in a
temporary file in the destination's folder, then one rename puts it in place, so an interrupt or a crash
leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
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
