"""Reading, resolving (``inline://`` names, URLs), converting and strictly loading checkpoints.

Torch alone: messages go to the standard ``logging`` logger ``inline_dense.checkpoint``; mmengine is
imported only by the functions the OpenMMLab adapter calls (``register_mmengine_scheme``,
``mmengine_types.allow_mmengine_checkpoint_types``)."""
from .cache import CorruptCacheError, checkpoint_cache
from .download import DownloadError
from .errors import CORE, INIT_CFG, Advice, CheckpointError
from .loading import Allowed, IntegerWeightsError, check_weights, fit_report, load_file, load_pretrained, load_state
from .mmengine_scheme import register_mmengine_scheme
from .reading import read_checkpoint, select_weights, state_dict_of
from .safe_unpickle import PickledObject, RefusedPickle
from .sources import PUBLISHED, SCHEME, resolve

__all__ = ['Advice', 'Allowed', 'CORE', 'CheckpointError', 'CorruptCacheError', 'DownloadError', 'INIT_CFG',
           'IntegerWeightsError', 'PUBLISHED', 'PickledObject', 'RefusedPickle', 'SCHEME', 'check_weights',
           'checkpoint_cache', 'fit_report', 'load_file', 'load_pretrained', 'load_state', 'read_checkpoint',
           'register_mmengine_scheme', 'resolve', 'select_weights', 'state_dict_of']
