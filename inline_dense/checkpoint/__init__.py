"""Reading, resolving (``inline://`` names, URLs), converting and strictly loading checkpoints.

Torch alone (no OpenMMLab package, at any depth): messages go to the standard ``logging`` logger
``inline_dense.checkpoint``. What mmengine needs of it, the ``inline://`` scheme for its
``CheckpointLoader`` and its Runner checkpoints' types for ``torch.load``, is in the OpenMMLab adapter
(:mod:`inline_dense.openmmlab.mmengine_scheme`, :mod:`inline_dense.openmmlab.mmengine_types`)."""
from .cache import CorruptCacheError, checkpoint_cache
from .download import DownloadError
from .errors import CORE, INIT_CFG, Advice, CheckpointError
from .loading import Allowed, IntegerWeightsError, check_weights, fit_report, load_file, load_pretrained, load_state
from .reading import read_checkpoint, select_weights, state_dict_of
from .safe_unpickle import PickledObject, RefusedPickle
from .sources import PUBLISHED, SCHEME, resolve

__all__ = ['Advice', 'Allowed', 'CORE', 'CheckpointError', 'CorruptCacheError', 'DownloadError', 'INIT_CFG',
           'IntegerWeightsError', 'PUBLISHED', 'PickledObject', 'RefusedPickle', 'SCHEME', 'check_weights',
           'checkpoint_cache', 'fit_report', 'load_file', 'load_pretrained', 'load_state', 'read_checkpoint',
           'resolve', 'select_weights', 'state_dict_of']
