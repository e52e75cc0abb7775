"""Latency / throughput / peak-memory measurement of backbones and whole models.

Used by ``tools/benchmark.py``; every function here measures inside the current
process. The tool runs each (model, resolution, mode) in a fresh subprocess so
that peak CPU memory (resident set size) belongs to that measurement alone.
"""
import math
import os
import resource
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import nn

HW = Tuple[int, int]

# ----------------------------------------------------------------------------- models
SWIN = {'t': dict(embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24)),
        's': dict(embed_dims=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24)),
        'b': dict(embed_dims=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32))}
PVT_LAYERS = {'t': (2, 2, 2, 2), 's': (3, 4, 6, 3), 'm': (3, 4, 18, 3), 'l': (3, 8, 27, 3)}
INLINE_ARCH = {'t': 'tiny', 's': 'small', 'b': 'base', 'm': 'medium', 'l': 'large'}


def _inline_swin(size: str) -> nn.Module:
    from inline_dense.models import InLineSwin
    return InLineSwin(INLINE_ARCH[size], drop_path_rate=0.1)


def _inline_pvt(size: str) -> nn.Module:
    from inline_dense.models import InLinePVT
    return InLinePVT(INLINE_ARCH[size], drop_path_rate=0.1)


def _mmdet_swin(size: str) -> nn.Module:
    from mmdet.models.backbones import SwinTransformer
    return SwinTransformer(window_size=7, drop_path_rate=0.1, **SWIN[size])


def _mmdet_pvt(size: str) -> nn.Module:
    from mmdet.models.backbones import PyramidVisionTransformer
    # mmdet's PVT v1 defaults are the paper's (embed 64, heads 1-2-5-8, sr 8-4-2-1, mlp 8-8-4-4).
    return PyramidVisionTransformer(num_layers=list(PVT_LAYERS[size]), drop_path_rate=0.1)


def backbone_zoo() -> Dict[str, Callable[[], nn.Module]]:
    """Name -> builder. 'inline-swin-t' etc. are ours; 'swin-t' / 'pvt-t' are mmdet's softmax ones."""
    zoo: Dict[str, Callable[[], nn.Module]] = {}
    for s in SWIN:
        zoo[f'inline-swin-{s}'] = lambda s=s: _inline_swin(s)
        zoo[f'swin-{s}'] = lambda s=s: _mmdet_swin(s)
    for s in PVT_LAYERS:
        zoo[f'inline-pvt-{s}'] = lambda s=s: _inline_pvt(s)
        zoo[f'pvt-{s}'] = lambda s=s: _mmdet_pvt(s)
    return zoo


def build_backbone(name: str) -> nn.Module:
    zoo = backbone_zoo()
    if name not in zoo:
        raise ValueError(f'unknown model {name!r}; choose from {sorted(zoo)} or pass --config PATH.')
    return zoo[name]()


class ConfigModel(nn.Module):
    """A whole mmdet/mmseg model from a config, called in ``mode='tensor'`` on a plain batch.

    ``forward(x)`` returns the raw head outputs (a nested tuple of tensors); data samples
    carrying the image sizes are made up for the batch, so no dataset is needed.
    """

    def __init__(self, config_path: str) -> None:
        super().__init__()
        from mmengine.config import Config
        from mmengine.registry import init_default_scope
        from mmengine.utils import import_modules_from_strings
        cfg = Config.fromfile(config_path)
        if cfg.get('custom_imports'):
            import_modules_from_strings(**cfg.custom_imports)
        scope = cfg.get('default_scope', 'mmdet')
        init_default_scope(scope)
        if scope == 'mmseg':
            from mmseg.registry import MODELS
            from mmseg.structures import SegDataSample as Sample
        else:
            from mmdet.registry import MODELS
            from mmdet.structures import DetDataSample as Sample
        model_cfg = cfg.model.copy()
        model_cfg.pop('data_preprocessor', None)  # inputs are made already normalised
        self.model = MODELS.build(model_cfg)
        self.sample_type = Sample
        self.scope = scope

    def samples(self, x: torch.Tensor) -> List[Any]:
        h, w = x.shape[-2:]
        meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w), batch_input_shape=(h, w),
                    scale_factor=(1.0, 1.0))
        return [self.sample_type(metainfo=meta) for _ in range(x.shape[0])]

    def forward(self, x: torch.Tensor) -> Any:
        return self.model(x, self.samples(x), mode='tensor')


def build_model(name: Optional[str] = None, config: Optional[str] = None) -> nn.Module:
    if config is not None:
        if not os.path.isfile(config):
            raise FileNotFoundError(f'config {config!r} does not exist; pass a path to an mmdet/mmseg config.')
        return ConfigModel(config)
    if name is None:
        raise ValueError('give a model name or a config path.')
    return build_backbone(name)


def init_model(model: nn.Module) -> None:
    """Random initialisation as the model defines it (no checkpoint is loaded)."""
    init = getattr(model, 'init_weights', None)
    if callable(init):
        try:
            init()
        except Exception as err:  # a 'Pretrained' init_cfg points at a file we do not have
            print(f'[benchmark] init_weights skipped ({type(err).__name__}: {err}); using default init',
                  file=sys.stderr)


def tensors_in(obj: Any) -> Iterable[torch.Tensor]:
    """All tensors of a nested tuple/list/dict output."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from tensors_in(o)


def output_sum(out: Any) -> torch.Tensor:
    return sum(t.float().sum() for t in tensors_in(out) if t.is_floating_point())


# ----------------------------------------------------------------------------- memory
def current_rss() -> int:
    """Resident set size of this process in bytes (Linux /proc, else ru_maxrss)."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except OSError:
        return _ru_maxrss()


def _ru_maxrss() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == 'darwin' else rss * 1024


def _read_hwm() -> Optional[int]:
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakRSS:
    """Peak resident memory of this process while active, in bytes above the level at entry.

    Linux: resets the kernel's high-water mark (``/proc/self/clear_refs``) on entry and reads
    ``VmHWM`` on exit, which catches every allocation, torch's included. Elsewhere a thread
    samples the RSS every millisecond (short peaks may be missed).
    """

    def __init__(self) -> None:
        self.peak = 0
        self.method = ''
        self._base = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._sampled = 0

    def __enter__(self) -> 'PeakRSS':
        self._base = current_rss()
        try:
            with open('/proc/self/clear_refs', 'w') as f:
                f.write('5')
            self.method = 'VmHWM'
        except OSError:
            self.method = 'sampled'
            self._sampled = self._base
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, current_rss())

    def __exit__(self, *exc: Any) -> None:
        if self.method == 'VmHWM':
            hwm = _read_hwm()
            top = hwm if hwm is not None else current_rss()
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            top = max(self._sampled, current_rss())
        self.peak = max(0, top - self._base)


class PeakCuda:
    """Peak CUDA memory allocated by torch while active, above the level at entry, in bytes."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak = 0
        self.method = 'max_memory_allocated'

    def __enter__(self) -> 'PeakCuda':
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._base = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.cuda.synchronize(self.device)
        self.peak = torch.cuda.max_memory_allocated(self.device) - self._base


# ----------------------------------------------------------------------------- timing
@dataclass
class Measurement:
    """One (model, resolution, mode) result. Times in milliseconds, memory in MiB."""
    model: str
    height: int
    width: int
    mode: str
    device: str
    batch: int
    threads: int
    times_ms: List[float] = field(default_factory=list)
    median_ms: float = math.nan
    cpu_ms: float = math.nan  # median process CPU time per step, all threads
    throughput: float = math.nan  # images per second
    peak_mib: float = math.nan
    memory_method: str = ''
    error: str = ''

    @property
    def pixels(self) -> int:
        return self.height * self.width

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d['pixels'] = self.pixels
        return d


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_calls(step: Callable[[], None], device: torch.device, warmup: int,
               runs: int) -> Tuple[List[float], List[float]]:
    """Calls ``step`` warmup times, then returns the wall times and the process CPU times
    (ms, all threads together) of ``runs`` more calls.

    On a shared machine the CPU time of a one-thread run is the steadier figure: time the
    process spends descheduled counts in the wall time but not in the CPU time.
    """
    for _ in range(warmup):
        step()
    _sync(device)
    times, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return times, cpu


def make_step(model: nn.Module, x: torch.Tensor, mode: str) -> Callable[[], None]:
    """Inference: one forward under no_grad. Train: forward + backward of the outputs' sum."""
    if mode == 'infer':
        model.eval()

        def step() -> None:
            with torch.no_grad():
                model(x)
    elif mode == 'train':
        model.train()

        def step() -> None:
            output_sum(model(x)).backward()
            for p in model.parameters():
                p.grad = None
    else:
        raise ValueError(f"mode must be 'infer' or 'train', got {mode!r}")
    return step


def measure(model_name: str, height: int, width: int, mode: str = 'infer', device: str = 'cpu',
            batch: int = 1, warmup: int = 2, runs: int = 5, threads: Optional[int] = None,
            config: Optional[str] = None) -> Measurement:
    """Builds the model, then times ``runs`` steps after ``warmup`` and records the peak memory."""
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    label = model_name if config is None else os.path.splitext(os.path.basename(config))[0]
    result = Measurement(label, height, width, mode, device, batch, torch.get_num_threads())
    torch.manual_seed(0)
    model = build_model(model_name if config is None else None, config)
    init_model(model)
    model.to(dev)
    x = torch.randn(batch, 3, height, width, device=dev)
    step = make_step(model, x, mode)
    tracker = PeakCuda(dev) if dev.type == 'cuda' else PeakRSS()
    with tracker:
        times, cpu = time_calls(step, dev, warmup, runs)
    result.times_ms = [round(t, 3) for t in times]
    result.cpu_ms = statistics.median(cpu)
    result.median_ms = statistics.median(times)
    result.throughput = batch * 1e3 / result.median_ms
    result.peak_mib = tracker.peak / 2 ** 20
    result.memory_method = tracker.method
    return result


# ----------------------------------------------------------------------------- one layer
class _ReferenceChannelsLast(nn.Module):
    """Ablation: the textbook path with only the depthwise residual done channels-last."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor, hw: HW) -> torch.Tensor:
        a = self.attn
        q, k, v = a.qkv(x).chunk(3, dim=-1)
        out = a.global_attention(q, k, v, None)
        taps = a.residual(x.mean(1).unsqueeze(-1))
        v = v.contiguous()
        res = torch.stack([a.local_residual_nhwc(v[i], taps[i], torch.zeros_like(v[i, 0]), hw)
                           for i in range(x.shape[0])])
        return a.proj(out + res)


def layer_variants(tokens_hw: HW, dims: int, heads: int, batch: int = 1, window: int = 7,
                   ablation: bool = False) -> Dict[str, Callable[[], Any]]:
    """Callables for the single-layer comparison at a token grid, all on the same input.

    'qkv+proj': the layer's two projections alone (the floor); 'inline': InLineAttention
    as shipped; 'inline-reference': its textbook path; 'window-softmax': the Swin softmax
    window attention of the same width (our ShiftWindowMSA, unshifted). ``ablation`` adds
    the steps in between: 'reference+channels-last' (textbook, depthwise residual
    channels-last) and 'folded-keys' (folded path, ctx always from projected keys).
    """
    from inline_dense.models.inline_attention import InLineAttention
    from inline_dense.models.window_attention import ShiftWindowMSA
    h, w = tokens_hw
    torch.manual_seed(0)
    x = torch.randn(batch, h * w, dims)
    inline = InLineAttention(dims, heads).eval()

    def copy(fused: bool, gram: Optional[bool] = None) -> InLineAttention:
        attn = InLineAttention(dims, heads).eval()
        attn.load_state_dict(inline.state_dict())
        attn.fused = fused
        if gram is not None:
            attn.use_gram = lambda n: gram
        return attn

    reference = copy(False)
    window_attn = ShiftWindowMSA(dims, heads, window).eval()

    def floor() -> Any:
        inline.qkv(x)
        return inline.proj(x)

    table = {
        'qkv+proj': floor,
        'inline': lambda: inline(x, tokens_hw),
        'inline-reference': lambda: reference(x, tokens_hw),
        'window-softmax': lambda: window_attn(x, tokens_hw),
    }
    if ablation:
        cl = _ReferenceChannelsLast(reference)
        keys = copy(True, gram=False)
        table['reference+channels-last'] = lambda: cl(x, tokens_hw)
        table['folded-keys'] = lambda: keys(x, tokens_hw)
    return table


def measure_layer(tokens_hw: HW, dims: int, heads: int, rounds: int = 15, warmup: int = 2,
                  batch: int = 1, variants: Optional[Sequence[str]] = None, ablation: bool = False,
                  progress: Optional[Callable[[int], None]] = None
                  ) -> Tuple[Dict[str, List[float]], Dict[str, List[float]]]:
    """Wall and process-CPU times (ms) of each variant, interleaved round by round so that
    load drifts hit all variants alike."""
    table = layer_variants(tokens_hw, dims, heads, batch, ablation=ablation)
    names = list(variants) if variants else list(table)
    wall: Dict[str, List[float]] = {n: [] for n in names}
    cpu: Dict[str, List[float]] = {n: [] for n in names}
    with torch.no_grad():
        for name in names:
            for _ in range(warmup):
                table[name]()
        for _ in range(rounds):
            for name in names:
                t0, c0 = time.perf_counter(), time.process_time()
                table[name]()
                wall[name].append((time.perf_counter() - t0) * 1e3)
                cpu[name].append((time.process_time() - c0) * 1e3)
            if progress is not None:
                progress(1)
    return wall, cpu
