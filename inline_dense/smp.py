"""InLine encoders for segmentation_models_pytorch (smp 0.6.x): ``import inline_dense.smp``, then
``smp.UPerNet('tu-inline_swin_t', encoder_weights=None, classes=K)``.

smp reaches InLine through timm (its ``tu-`` encoders); importing this module checks that smp can
run here (it needs Python >= 3.10) and registers the models with timm (:mod:`inline_dense.timm`).
The encoders give strides 4-32, so decoders that need output stride 8 or 16 (DeepLabV3/V3+) are
refused with a ``ValueError`` saying why. Unet takes any input size; smp's other decoders ask for
multiples of 32. ``save_pretrained`` / ``from_pretrained`` round-trip a model on an InLine encoder
without the pretrained file it was first built from (``from_pretrained`` loads every tensor from the
saved file, so it builds the encoder with ``encoder_weights=None``).
"""
import sys

MIN_PYTHON = (3, 10)

if sys.version_info < MIN_PYTHON:
    raise ImportError(f'inline_dense.smp: segmentation_models_pytorch 0.6 needs Python >= 3.10; this is Python '
                      f'{sys.version_info[0]}.{sys.version_info[1]}. The InLine backbones themselves, the timm models '
                      f'(inline_dense.timm) and the torchvision detection backbones work on 3.9.')

try:
    import segmentation_models_pytorch as smp
except ImportError as exc:
    raise ImportError(f'inline_dense.smp needs segmentation_models_pytorch 0.6.x: pip install "inline_dense[smp]" '
                      f'(or pip install "segmentation-models-pytorch>=0.6,<0.7") ({exc}).') from exc

from segmentation_models_pytorch.base import SegmentationModel  # noqa: E402

from . import timm as _registers_the_models  # noqa: F401,E402
from .models.classifier import VARIANTS  # noqa: E402

ENCODER_PREFIX = 'tu-inline_'
_hub_from_pretrained = SegmentationModel._from_pretrained.__func__  # huggingface_hub's: build, then load the file


def _from_pretrained(cls, **kwargs):
    """``smp.from_pretrained`` / ``Model.from_pretrained`` of a model on an InLine encoder: the
    model is built with ``encoder_weights=None``, since the saved file then supplies every tensor,
    so the original pretrained checkpoint (``pretrained_cfg_overlay``'s file, ``inline://``) need
    not exist any more; the model's config keeps the saved ``encoder_weights``. Other encoders:
    unchanged (smp's way)."""
    weights = kwargs.get('encoder_weights')
    if not (str(kwargs.get('encoder_name', '')).startswith(ENCODER_PREFIX) and weights):
        return _hub_from_pretrained(cls, **kwargs)
    model = _hub_from_pretrained(cls, **dict(kwargs, encoder_weights=None))
    if isinstance(getattr(model, '_hub_mixin_config', None), dict):
        model._hub_mixin_config['encoder_weights'] = weights  # as saved: save_pretrained writes it again
    return model


if getattr(SegmentationModel._from_pretrained, '__func__', None) is _hub_from_pretrained:  # once per process
    SegmentationModel._from_pretrained = classmethod(_from_pretrained)


def encoder_name(variant: str) -> str:
    """smp's encoder name of an InLine variant: ``'inline_pvt_t'`` -> ``'tu-inline_pvt_t'``."""
    if variant not in VARIANTS:
        raise ValueError(f'unknown InLine variant {variant!r}; use one of {sorted(VARIANTS)}.')
    return 'tu-' + variant


__all__ = ['MIN_PYTHON', 'encoder_name', 'smp']
