"""Writing a generated dataset folder safely: into a temporary sibling, then one rename.

A folder made here carries ``toy_meta.json`` (what made it and with which settings), so
a toy folder is never confused with a real dataset and is never overwritten by accident.
"""
import json
import os
import os.path as osp
import shutil
import tempfile
from collections.abc import Callable

STAMP = 'toy_meta.json'


def read_stamp(root: str) -> dict | None:
    """The settings ``root`` was generated with, or None when it has no stamp."""
    path = osp.join(root, STAMP)
    if not osp.isfile(path):
        return None
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def build_folder(root: str, settings: dict, fill: Callable[[str], None], force: bool = False) -> str:
    """Creates ``root`` by calling ``fill(tmp_dir)`` and renaming tmp_dir to ``root``.

    An existing toy folder (one with a stamp) is kept unless ``force`` or it was made by
    another version of the generator; an existing folder without a stamp is never touched.
    Concurrent callers (e.g. one per process of a distributed run) are safe: the first rename wins,
    the others discard theirs.
    """
    root = osp.abspath(root)
    if osp.exists(root):
        stamp = read_stamp(root)
        if stamp is None:
            raise FileExistsError(
                f'{root} exists but was not made by the toy data generator (no {STAMP}); '
                f'it is left untouched. Choose another folder or remove this one.')
        if stamp.get('kind') != settings.get('kind'):
            raise FileExistsError(f'{root} holds toy data of kind {stamp.get("kind")!r}, not '
                                  f'{settings.get("kind")!r}; choose another folder.')
        if stamp.get('version') != settings.get('version'):
            force = True  # made by an older generator: regenerate
        if not force:
            return root
    parent = osp.dirname(root)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=osp.basename(root) + '.tmp-', dir=parent)
    try:
        fill(tmp)
        with open(osp.join(tmp, STAMP), 'w', encoding='utf-8') as f:
            json.dump(settings, f, indent=1, sort_keys=True)
        if force and osp.exists(root):
            shutil.rmtree(root)
        try:
            os.rename(tmp, root)
        except OSError:
            if read_stamp(root) is None:  # not a concurrent writer of the same folder
                raise
    finally:
        if osp.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return root
