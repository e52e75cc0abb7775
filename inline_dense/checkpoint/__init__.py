"""Reading, resolving (``inline://`` names, URLs), converting and strictly loading checkpoints.

Torch alone: messages go to the standard ``logging`` logger ``inline_dense.checkpoint``; mmengine is
imported only by the functions the OpenMMLab adapter calls (``register_mmengine_scheme``,
``mmengine_types.allow_mmengine_checkpoint_types``)."""
from .download import CorruptCacheError, DownloadError
from .loading import CheckpointError, load_pretrained, read_checkpoint, select_weights, state_dict_of
from .mmengine_scheme import register_mmengine_scheme
from .safe_unpickle import PickledObject, RefusedPickle
from .sources import PUBLISHED, SCHEME, checkpoint_cache, resolve

__all__ = ['CheckpointError', 'CorruptCacheError', 'DownloadError', 'PUBLISHED', 'PickledObject', 'RefusedPickle',
           'SCHEME', 'checkpoint_cache', 'load_pretrained', 'read_checkpoint', 'register_mmengine_scheme', 'resolve',
           'select_weights', 'state_dict_of']
