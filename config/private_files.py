"""Files under var/ hold secrets and the embedded database: only their owner may read them."""

import os
import stat
from pathlib import Path

from config.env import SettingError


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed and make it owner-only (0700). A directory other
    users share (sticky, as /tmp, or another user's) is refused, never changed: VAR_DIR=/tmp
    made /tmp owner-only, and every other user and service of the host lost it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    found = path.stat()
    if found.st_mode & 0o077:
        if found.st_mode & stat.S_ISVTX or found.st_uid != os.geteuid():
            raise SettingError(
                f"{path} is shared with other users (mode {stat.S_IMODE(found.st_mode):o}, "
                f"owner uid {found.st_uid}); the product keeps secrets in it: set VAR_DIR to "
                "a directory of its own")
        path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file that is owner-only (0600) from the moment it exists: it is made
    beside its target and renamed into place, so no reader ever sees a half-written secret."""
    private_dir(path.parent)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def create_private(path: Path, text: str) -> bool:
    """Create an owner-only file unless it exists; True when this call created it. Linked into
    place whole, so two processes starting at once agree on one content."""
    private_dir(path.parent)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    write_private(partial, text)
    try:
        os.link(partial, path)
    except FileExistsError:
        return False
    finally:
        partial.unlink(missing_ok=True)
    return True


def touch_private(path: Path) -> None:
    """Make sure `path` exists and is owner-only: SQLite then gives its -wal and -shm files
    the same mode."""
    private_dir(path.parent)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


def var_dir() -> Path:
    """This checkout's state directory: VAR_DIR, or var/ beside manage.py."""
    configured = os.environ.get("VAR_DIR", "").strip()
    return Path(configured) if configured else Path(__file__).resolve().parent.parent / "var"
