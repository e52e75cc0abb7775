"""Running a model built elsewhere, shared by ``analysis`` (measuring) and ``deploy`` (exporting):
a whole mmdet/mmseg model from a config (:mod:`.config_model`), which InLine evaluation its layers
run (:mod:`.attn_impl`), the tensors of its outputs (:mod:`.outputs`)."""
from .attn_impl import inline_impl, inline_layers
from .config_model import ConfigModel
from .outputs import tensors_in

__all__ = ['ConfigModel', 'inline_impl', 'inline_layers', 'tensors_in']
