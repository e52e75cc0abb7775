"""InLine encoders for segmentation_models_pytorch (smp 0.6.x): ``import inline_dense.smp``, then
``smp.UPerNet('tu-' + name, encoder_weights=None, classes=K)`` for a name of :mod:`inline_dense.variants`.

smp reaches InLine through timm (its ``tu-`` encoders); importing this module checks that smp can
run here (it needs Python >= 3.10) and registers the models with timm (:mod:`inline_dense.timm`).
The pyramids' encoders give strides 4-32, so decoders that need output stride 8 or 16 (DeepLabV3/V3+)
are refused with a ``ValueError`` saying why. The plain InLine-DeiT (one stride) goes with DPT,
smp's decoder for plain ViTs (its ``TimmViTEncoder``: the blocks' maps and their cls tokens through
``forward_intermediates(return_prefix_tokens=True)``); the multi-stride decoders refuse it in one line.
Unet takes any input size; smp's other decoders ask for multiples of 32. ``save_pretrained`` /
``from_pretrained`` round-trip a model on an InLine encoder
without the pretrained file it was first built from (``from_pretrained`` loads every tensor from the
saved file, so it builds the encoder with ``encoder_weights=None``). ``in_channels`` other than 3
adapts the pretrained first convolution (through timm's ``in_chans``); checkpoint errors name smp's
``encoder_weights``.
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
from segmentation_models_pytorch.encoders.timm_universal import TimmUniversalEncoder  # noqa: E402
from segmentation_models_pytorch.encoders.timm_vit import TimmViTEncoder  # noqa: E402

from . import timm as _registers_the_models  # noqa: F401,E402
from . import variants  # noqa: E402
from .checkpoint import Advice  # noqa: E402
from .timm import ADVICE_ARG  # noqa: E402

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


def smp_advice(variant: str) -> Advice:
    """The errors' ending for an smp user of the ``tu-<variant>`` encoder."""
    return Advice(f'pass a file you downloaded yourself: smp.<Model>(\'tu-{variant}\', encoder_weights=True, '
                  f'pretrained_cfg_overlay=dict(file=\'/path/to/{variants.file_name(variant)}\'))',
                  'encoder_weights=None for a randomly initialised encoder')


_timm_encoder_init = getattr(TimmUniversalEncoder.__init__, '__wrapped__', TimmUniversalEncoder.__init__)


def check_multi_stride(variant: str) -> None:
    """smp's decoders but DPT take an encoder's maps at several strides (4 to 32); a plain ViT
    (InLine-DeiT) gives one stride: a ValueError saying so (and pointing to DPT)."""
    strides = sorted({o.stride for o in variants.spec_of(variant).preset_outputs(variants.variant(variant).arch)})
    if len(strides) < 2:
        raise ValueError(f'smp: tu-{variant} gives maps at stride {strides[0]} only (a plain ViT, one map per block); '
                         f"this decoder needs a multi-stride encoder (strides 4 to 32): use smp.DPT, smp's decoder for "
                         f"plain ViTs, a pyramid such as tu-{variants.EXAMPLE}, or this backbone with mmseg's or "
                         f"transformers' UperNet.")


def _encoder_init(self, name: str, *args, **kwargs) -> None:
    """smp's timm encoder; for an InLine one, checkpoint errors speak smp's arguments
    (``encoder_weights``), not timm's: smp hands its advice to our timm models (``ADVICE_ARG``).
    A single-stride InLine encoder (a plain ViT) is refused (``check_multi_stride``)."""
    if name in variants.VARIANTS:
        check_multi_stride(name)
        kwargs[ADVICE_ARG] = smp_advice(name)
    return _timm_encoder_init(self, name, *args, **kwargs)


_encoder_init.__wrapped__ = _timm_encoder_init  # type: ignore[attr-defined]
TimmUniversalEncoder.__init__ = _encoder_init
_vit_encoder_init = getattr(TimmViTEncoder.__init__, '__wrapped__', TimmViTEncoder.__init__)


def _vit_encoder(self, name: str, *args, **kwargs) -> None:
    """smp's ViT encoder (DPT's); for an InLine one, checkpoint errors speak smp's arguments."""
    if name in variants.VARIANTS:
        kwargs[ADVICE_ARG] = smp_advice(name)
    return _vit_encoder_init(self, name, *args, **kwargs)


_vit_encoder.__wrapped__ = _vit_encoder_init  # type: ignore[attr-defined]
TimmViTEncoder.__init__ = _vit_encoder


def encoder_name(variant: str) -> str:
    """smp's encoder name of an InLine variant (a name of :data:`inline_dense.variants.VARIANTS`):
    ``'tu-'`` and the name."""
    variants.variant(variant)
    return 'tu-' + variant


__all__ = ['MIN_PYTHON', 'check_multi_stride', 'encoder_name', 'smp', 'smp_advice']
