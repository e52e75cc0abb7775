"""The error every checkpoint reader raises, and the advice its messages end with, in a module of
their own so that the checks (``finite``, ``reading``, ``loading``) share them without importing
each other.

The advice is passed explicitly, from the API the user called down to the message: the core's own
functions speak plain PyTorch (:data:`CORE`); each adapter passes its own (:data:`INIT_CFG` for
OpenMMLab's ``init_cfg``, timm's ``pretrained_cfg_overlay``, smp's ``encoder_weights``, torchvision's
``weights``)."""
from typing import NamedTuple


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read, or does not fit the model."""


class Advice(NamedTuple):
    """What a user can do about a checkpoint that cannot be used, in the terms of the API they called
    (``init_cfg`` for OpenMMLab, ``pretrained_cfg_overlay`` for timm, ``encoder_weights`` for smp)."""
    other_file: str                  # how to load another file: "point init_cfg.checkpoint at a good file"
    no_weights: str                  # how to go without: "set init_cfg=None to train from scratch"
    short_name: str | None = None  # how to name a short name, '{name}' for it; None: not an option here
    elsewhere: str | None = None  # how to load a file saved anywhere (a download's hint); None: other_file

    def ending(self, first: str = '') -> str:
        """``'Point init_cfg.checkpoint at a good file, or set init_cfg=None to train from scratch.'``,
        after ``first`` (another remedy) when given."""
        text = f'{first + ", " if first else ""}{self.other_file}, or {self.no_weights}.'
        return text[0].upper() + text[1:]


INIT_CFG = Advice('point init_cfg.checkpoint at a good file', 'set init_cfg=None to train the backbone from scratch',
                  "init_cfg.checkpoint='inline://{name}'",
                  "point the backbone's init_cfg.checkpoint at the file wherever it is")
"""An OpenMMLab backbone's ``init_cfg=dict(type='Pretrained', checkpoint=...)``."""

CORE = Advice('pass another checkpoint (a file, an http(s) URL or inline://<variant>)',
              'pass none for random weights', "'inline://{name}'")
"""The torch-only API: ``load_pretrained(model, checkpoint)``, ``build_classifier(checkpoint=...)``."""

