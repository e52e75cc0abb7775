"""Whether a file is a complete checkpoint archive: the test a download must pass to enter the
cache, and the one the training checkpoints are held to (``engine.checkpointing``, ``resume_checks``)."""
import zipfile
from pathlib import Path

from . import safe_unpickle


def archive_problem(path: Path, thorough: bool = True) -> str | None:
    """Why ``path`` is not a complete checkpoint file, or None when it is one.

    A zip archive (``torch.save``'s format) must open (a cut file loses the central directory
    at its end) and hold ``data.pkl``; ``thorough`` also checks every member's CRC. A legacy
    (pickle) file must read through the restricted unpickler (which runs none of its code).
    """
    try:
        with open(path, 'rb') as f:
            head = f.read(4)
        if head == b'PK\x03\x04':
            with zipfile.ZipFile(path) as zf:
                if not any(n.endswith('data.pkl') for n in zf.namelist()):
                    return 'a zip archive without data.pkl, not a PyTorch checkpoint'
                bad = zf.testzip() if thorough else None
            return f'member {bad} of the archive is damaged' if bad else None
        if head[:1] == b'\x80':
            safe_unpickle.load(str(path), 'cpu')
            return None
        return 'neither a zip archive nor a pickle'
    except safe_unpickle.RefusedPickle as exc:
        return f'it names code the safe loader refuses ({exc})'
    except (zipfile.BadZipFile, EOFError, OSError, RuntimeError, ValueError, IndexError, KeyError) as exc:
        return f'it is cut off or damaged ({type(exc).__name__}: {str(exc)[:120]})'
