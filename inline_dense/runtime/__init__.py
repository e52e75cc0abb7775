"""Running a model built elsewhere, shared by ``analysis`` (measuring) and ``deploy`` (exporting):
which InLine evaluation its layers run (:mod:`.attn_impl`), the tensors of its outputs
(:mod:`.outputs`). Torch alone; a whole mmdet/mmseg model from a config is
:class:`inline_dense.openmmlab.config_model.ConfigModel`."""
from .attn_impl import inline_impl, inline_layers
from .outputs import tensors_in

__all__ = ['inline_impl', 'inline_layers', 'tensors_in']
