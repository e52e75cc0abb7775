"""Reading, resolving (``inline://`` names, URLs), converting and strictly loading checkpoints.

Torch alone (no OpenMMLab package, at any depth): messages go to the standard ``logging`` logger
``inline_dense.checkpoint``. What mmengine needs of it, the ``inline://`` scheme for its
``CheckpointLoader`` and its Runner checkpoints' types for ``torch.load``, is in the OpenMMLab adapter
(:mod:`inline_dense.openmmlab.mmengine_scheme`, :mod:`inline_dense.openmmlab.mmengine_types`)."""
from .download import CorruptCacheError, DownloadError
from .loading import CheckpointError, load_pretrained, read_checkpoint, select_weights, state_dict_of
from .safe_unpickle import PickledObject, RefusedPickle
from .sources import PUBLISHED, SCHEME, checkpoint_cache, resolve

__all__ = ['CheckpointError', 'CorruptCacheError', 'DownloadError', 'PUBLISHED', 'PickledObject', 'RefusedPickle',
           'SCHEME', 'checkpoint_cache', 'load_pretrained', 'read_checkpoint', 'resolve',
           'select_weights', 'state_dict_of']
