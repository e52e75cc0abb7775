"""The compiled inference path in a Runner: ``tools/test.py --compile`` and ``tools/demo_toy.py --compile``.

``InferenceCompileHook`` compiles the model's backbone, neck and decode head
(:func:`inline_dense.runtime.compiling.compile_for_inference`) at the start of the test loop, after the
Runner loaded the checkpoint (freezing makes the weights constants of the graph), and puts them back to
eager after it, so that a training run that tests at its end trains eagerly and a resumed one is unchanged.
The padding mask stays on: the backbone's ``valid_hw`` (each image's size before padding) reaches the
compiled forward as an argument. Config: ``custom_hooks = [dict(type='InferenceCompileHook')]``, with
``sizes='static'`` for a test set whose images all pad to one size (a graph per size, faster).
"""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from ...runtime.compiling import check_sizes, compile_for_inference, uncompile


@HOOKS.register_module()
class InferenceCompileHook(Hook):
    """``before_test``: compile the model for inference; ``after_test``: back to eager."""

    priority = 'LOW'  # after the hooks that install things on the model (the padding mask)

    def __init__(self, backend: str = 'inductor', sizes: str = 'dynamic') -> None:
        check_sizes(sizes, 'InferenceCompileHook in custom_hooks')
        self.backend = backend
        self.sizes = sizes

    def before_test(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        compile_for_inference(model, backend=self.backend, sizes=self.sizes)

    def after_test(self, runner) -> None:
        uncompile(runner.model.module if is_model_wrapper(runner.model) else runner.model)
