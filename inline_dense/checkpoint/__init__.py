"""Reading, resolving (``inline://`` names, URLs), converting and strictly loading checkpoints."""
from .download import CorruptCacheError, DownloadError
from .loading import (
                      CheckpointError,
                      load_pretrained,
                      read_checkpoint,
                      register_mmengine_scheme,
                      select_weights,
                      state_dict_of,
)
from .safe_unpickle import PickledObject, RefusedPickle
from .sources import PUBLISHED, SCHEME, checkpoint_cache, resolve

__all__ = ['CheckpointError', 'CorruptCacheError', 'DownloadError', 'PUBLISHED', 'PickledObject', 'RefusedPickle',
           'SCHEME', 'checkpoint_cache', 'load_pretrained', 'read_checkpoint', 'register_mmengine_scheme', 'resolve',
           'select_weights', 'state_dict_of']
