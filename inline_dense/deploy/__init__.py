"""Running InLine models outside the training framework: ONNX export with dynamic sizes
(:mod:`.onnx_export`) of the modules :mod:`.models` / :mod:`.wrappers` make of a config."""
from .models import deployable, load_full_checkpoint
from .onnx_export import (
                          CHECK_SHAPES,
                          EXPORT_SHAPE,
                          TOLERANCE,
                          CheckRow,
                          OnnxMismatchError,
                          check_onnx,
                          export_onnx,
                          export_with_fallback,
                          fit_check_shapes,
                          format_rows,
                          output_names,
                          outside_ranges,
)
from .wrappers import (
                          AdaptiveAvgPool2dByMatmul,
                          DetectorFeatures,
                          SegmentorLogits,
                          UpsampleByInteger,
                          replace_adaptive_pooling,
                          replace_float_upsampling,
)

__all__ = ['deployable', 'load_full_checkpoint', 'CHECK_SHAPES', 'EXPORT_SHAPE', 'TOLERANCE', 'CheckRow',
           'OnnxMismatchError', 'check_onnx', 'export_onnx', 'export_with_fallback', 'fit_check_shapes',
           'format_rows', 'output_names', 'outside_ranges',
           'AdaptiveAvgPool2dByMatmul', 'DetectorFeatures', 'SegmentorLogits', 'UpsampleByInteger',
           'replace_adaptive_pooling', 'replace_float_upsampling']
