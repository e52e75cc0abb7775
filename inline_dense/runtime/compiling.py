"""The compiled inference path, chosen the same way by every tool (``--compile``) and by a library user.

    from inline_dense.runtime.compiling import compile_for_inference
    compile_for_inference(model)   # a backbone, or an mmdet / mmseg model: its backbone, neck, decode head
    with torch.no_grad():
        model(x)                   # the first call compiles (and says so, with the time it took)

What it does, and why:

* **inductor with freezing** (inductor's ``freezing`` setting, on during each call): under ``no_grad`` the
  weights are constants of the graph, so inductor prepacks them and fuses bias, GELU and residual adds
  into oneDNN's GEMMs, LayerNorms and casts into its own loops. Weights changed after the first call are
  not seen: compile after loading the checkpoint (the tools compile at the start of the test loop).
* **dynamic sizes** (``sizes='dynamic'``, the default: ``dynamic=True``): one graph for every height and
  width (two: sides on the 32-pixel grid and off it, below), and for every image size
  inside them (the test pipelines' padded sizes with the padding mask's ``valid_hw``: traced, the
  backbones build their masks without comparing sizes). Batches of 2 or more share a graph; batch 1 is
  one more (dynamo specialises a size of 1, and torch's size-oblivious mode fails inductor's lowering of
  the shifted windows); with ``valid_hw`` (a list, one size per image) each batch size is a graph.
  With float32 weights and a symbolic batch, inductor calls oneDNN's GEMM (which takes a fused bias /
  GELU / add) instead of MKL's packed one (which fuses nothing).
* **images in 32-pixel blocks** (dynamic sizes): an image whose sides are multiples of :data:`BLOCK` (what the
  detection pipelines pad to) reaches its graph as ``(B, C, H / 32, 32, W / 32, 32)``, the block sides static,
  flattened back inside the graph (a view). Each stage's side is then a multiple of one symbol instead of a
  nest of ceiling divisions of the input's, ``(((((s0 + 3)//4) + 1)//2) + 1)//2``, on which inductor's
  symbolic algebra spent most of a compile: a small InLine-Swin compiled in 126 s instead of 308 s (2-core
  AMD EPYC, the same outputs). Other inputs (sides off that grid, a neck's list of maps) take a second graph,
  compiled the first time one comes.
* **static sizes** (``sizes='static'``: ``dynamic=False``): a graph for each input size, every size known to
  inductor: its loops and oneDNN's prepacked GEMMs are tuned for it (InLine-Swin-T at 800x1216 in bf16 on one
  core with AMX: 311-378 ms a pass against 447 ms with dynamic sizes, separate processes). In float32 it is
  slower: with a known batch inductor takes MKL's packed GEMM, which fuses nothing. For a deployment at one
  fixed size (what an exported graph is too), or a test set whose images all pad to one size (Cityscapes);
  each new size compiles again (dynamo's recompile limit, 8, then runs further sizes eagerly). Its graphs
  run from inductor's C++ wrapper (``cpp_wrapper``) instead of Python calling each kernel: 2-4 % of that
  bf16 pass (one process, interleaved rounds), for about 13 s more compiling (22 -> 35 s); with dynamic
  sizes the same was 2 % for 58 s more (112 -> 170 s), so dynamic graphs keep the Python wrapper.
* **the module's own call is kept**: ``forward`` of each compiled module is replaced (an instance
  attribute), so hooks (the padding mask's ``valid_hw``), ``state_dict`` keys and ``isinstance`` are
  as before, and :func:`uncompile` restores it.
* **autocast composes**: a call under ``torch.autocast(bfloat16)`` (``--amp``) compiles a bf16 graph.
* **no C++ compiler**: inductor cannot build its CPU kernels; :func:`compile_for_inference` says so in
  one line and leaves the model eager (:func:`compiler_problem`).
* the first call that compiles prints ``[compile] <module>: compiled for <input> in <s> s``; a later call
  that compiles again (a size that guards on something new) says so too, as ``recompiled``.
"""
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import torch
from torch import nn

SIZES = ('dynamic', 'static')
CPP_WRAPPER = {'dynamic': False, 'static': True}  # whether graphs of these sizes run from inductor's C++ wrapper

# the modules of an OpenMMLab model that run on the whole image and hold no data-dependent post-processing
PARTS = ('backbone', 'neck', 'decode_head')
# with dynamic sizes an image whose sides are multiples of this is handed to the graph in blocks of this side
# (the module's docstring says why); 32 is every family's total stride
BLOCK = 32
_ORIGINAL = '_inline_eager_forward'


@functools.cache
def compiler_problem() -> str | None:
    """Why inductor cannot build CPU kernels here (no C++ compiler it finds, or one that fails on a
    trivial file), or None when it can."""
    try:
        from torch._inductor import cpp_builder
        cxx = cpp_builder.get_cpp_compiler()
    except Exception as err:  # torch raises its own error types when none of its candidates exists
        return f'no C++ compiler for inductor ({type(err).__name__}: {str(err).splitlines()[0][:120]})'
    if shutil.which(cxx) is None and not os.path.isfile(cxx):
        return f'no C++ compiler for inductor ({cxx!r} not found)'
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'probe.cpp')
        with open(src, 'w') as f:
            f.write('int main() { return 0; }\n')
        try:
            proc = subprocess.run([cxx, '-c', src, '-o', os.path.join(tmp, 'probe.o')], capture_output=True,
                                  text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f'the C++ compiler {cxx!r} does not run ({type(err).__name__})'
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        return f'the C++ compiler {cxx!r} fails on a trivial file ({first[0][:120] if first else proc.returncode})'
    return None


def parts_to_compile(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of what :func:`compile_for_inference` compiles in ``model``: its ``backbone``,
    ``neck`` and ``decode_head`` when it has any (an mmdet / mmseg model, a wrapper's ``module`` first),
    else the model itself (a backbone)."""
    model = getattr(model, 'module', model) if not hasattr(model, 'backbone') else model
    parts = [(name, getattr(model, name)) for name in PARTS if isinstance(getattr(model, name, None), nn.Module)]
    return parts or [(type(model).__name__, model)]


def _describe(args: Iterable[Any]) -> str:
    for a in args:
        if isinstance(a, torch.Tensor):
            return 'x'.join(map(str, a.shape))
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return f'{len(a)} maps, the first ' + 'x'.join(map(str, a[0].shape))
    return 'its input'


def _graphs() -> int:
    from torch._dynamo.utils import counters
    return int(sum(counters['stats'].get(k, 0) for k in ('unique_graphs',)))


def announce_compiles(fn: Callable[..., Any], name: str, stream: TextIO | None = None,
                      sizes: str = 'dynamic') -> Callable[..., Any]:
    """``fn`` (a compiled callable) that prints one line when a call compiled a graph: which module, for
    which input, how long the call took, whether it was the first graph or a recompile."""
    state = {'calls_compiled': 0}

    import torch.fx.experimental._config as fx_config

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        before = _graphs()
        t0 = time.perf_counter()
        # no duck sizing: a side that happens to equal a channel count (a 32-wide map of 32 channels) would
        # share its symbol, be fixed with it, and the next picture's size would compile again
        with fx_config.patch(use_duck_shape=False):
            out = fn(*args, **kwargs)
        made = _graphs() - before
        if made > 0:
            verb = 'compiled' if state['calls_compiled'] == 0 else 'recompiled'
            state['calls_compiled'] += 1
            print(f'[compile] {name}: {verb} for {_describe(args)} in {time.perf_counter() - t0:.1f} s '
                  f'(torch.compile, inductor, freezing{", C++ wrapper" if CPP_WRAPPER[sizes] else ""}; sizes {sizes})',
                  file=stream or sys.stderr, flush=True)
        return out
    return call


def _frozen(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` called with inductor's ``freezing`` on. ``torch.compile(options={'freezing': True})`` alone
    does not freeze (torch 2.14): dynamo, which decides whether the parameters become constants of the graph
    (``is_parameter_freezing``), reads the global setting, not the backend's options; without it the graph
    casts every weight to bfloat16 on each call and its GEMMs take unpacked weights (InLine-Swin-T 800x1216
    bf16: 1.5x the eager time). Patched for the call only, as the user's other compiles keep their setting."""
    import torch._inductor.config as inductor_config

    @functools.wraps(compiled)
    def call(*args: Any, **kwargs: Any) -> Any:
        with inductor_config.patch(freezing=True), warnings.catch_warnings():
            # with static sizes InLine's torch.cond on the token count has a constant predicate: the
            # branch taken is the one eager takes, as intended (dynamo warns on every compile)
            warnings.filterwarnings('ignore', message='Pred is a Python constant')
            return compiled(*args, **kwargs)
    return call


def check_sizes(sizes: str, caller: str) -> None:
    """Raises a ValueError, in ``caller``'s terms, unless ``sizes`` is one of :data:`SIZES`."""
    if sizes not in SIZES:
        raise ValueError(f"{caller}: sizes={sizes!r} is not one of {list(SIZES)}; use 'dynamic' for inputs of many "
                         f"sizes, 'static' for one fixed size.")


def compile_for_inference(model: nn.Module, stream: TextIO | None = None, backend: str = 'inductor',
                          sizes: str = 'dynamic') -> bool:
    """Compiles ``model``'s parts (:func:`parts_to_compile`) for inference, in place: True when compiled,
    False (after one line on ``stream``, stderr by default) where inductor has no C++ compiler and the model
    stays eager. ``sizes``: 'dynamic' (one graph for every input size) or 'static' (a graph per size, faster;
    see the module's docstring). Idempotent. Call it after the weights are loaded; run the model under
    ``torch.no_grad()`` (freezing applies there) and ``model.eval()``."""
    check_sizes(sizes, 'compile_for_inference')
    out = stream or sys.stderr
    if backend == 'inductor':
        problem = compiler_problem()
        if problem is not None:
            print(f'[compile] {problem}: running eagerly', file=out, flush=True)
            return False
    for name, part in parts_to_compile(model):
        if _ORIGINAL in part.__dict__:
            continue
        eager = part.forward

        def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
            options = {'freezing': True, 'cpp_wrapper': CPP_WRAPPER[sizes]} if backend == 'inductor' else None
            made = torch.compile(fn, backend=backend, dynamic=sizes == 'dynamic', options=options)
            return _frozen(made) if backend == 'inductor' else made

        call = compiled(eager)
        if sizes == 'dynamic':
            call = _in_blocks(compiled(_unblocking(eager, name)), call)
        object.__setattr__(part, _ORIGINAL, eager)
        part.forward = announce_compiles(call, name, out, sizes)  # type: ignore[method-assign]
    return True


def _unblocking(eager: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``eager`` called on an image handed over in blocks, ``(B, C, H / BLOCK, BLOCK, W / BLOCK, BLOCK)``,
    flattened back to ``(B, C, H, W)`` (a view) inside the graph. A function with a code object of its own:
    dynamo keeps its graphs per code object, so each compiled part has its own recompile limit."""
    def unblock(blocks: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return eager(blocks.flatten(4, 5).flatten(2, 3), *args, **kwargs)
    unblock.__code__ = unblock.__code__.replace(co_name=f'{name}_in_{BLOCK}px_blocks')
    return unblock


def _in_blocks(blocked: Callable[..., Any], plain: Callable[..., Any]) -> Callable[..., Any]:
    """Calls ``blocked`` with an image (the first argument, ``(B, C, H, W)``) whose sides are multiples of
    :data:`BLOCK`, handed over as ``BLOCK``-pixel blocks whose sides are static; ``plain`` with anything else."""
    def call(*args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else None
        if not (isinstance(x, torch.Tensor) and x.dim() == 4 and x.shape[2] % BLOCK == 0 and x.shape[3] % BLOCK == 0):
            return plain(*args, **kwargs)
        blocks = x.unflatten(3, (-1, BLOCK)).unflatten(2, (-1, BLOCK))
        torch._dynamo.mark_static(blocks, 3)
        torch._dynamo.mark_static(blocks, 5)
        return blocked(blocks, *args[1:], **kwargs)
    return call


def uncompile(model: nn.Module) -> None:
    """Restores the eager ``forward`` of every part :func:`compile_for_inference` compiled."""
    for _name, part in parts_to_compile(model):
        if _ORIGINAL in part.__dict__:
            del part.__dict__['forward']
            object.__delattr__(part, _ORIGINAL)

