"""The one place that finds belt's state directory."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from belt.errors import BeltError


def state_dir(*, create: bool = True) -> Path:
    """Return the state directory: ``$BELT_HOME``, else the user data dir; created 0700."""
    env = os.environ.get("BELT_HOME")
    if env:
        path = Path(env).expanduser()
    else:
        import platformdirs  # noqa: PLC0415 - start-up: without BELT_HOME only

        path = Path(platformdirs.user_data_dir("belt", appauthor=False))
    if create and not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to ``path`` as a 0600 file in a 0700 directory."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BeltError(f"{path}: cannot write ({exc.strerror or exc}); it is unchanged") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, for a message ("a FIFO (named pipe)")."""
    kinds = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory")]
    kinds += [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device")]
    kinds += [(stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(mode)), "not a regular file")
