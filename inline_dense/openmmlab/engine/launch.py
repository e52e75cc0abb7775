"""What tools/train.py, tools/test.py and tools/demo_toy.py share: loading a config,
telling MMDetection from MMSegmentation configs, and running on CPU-only machines."""
import contextlib
import datetime
import importlib
import os
import os.path as osp
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

from ...checkpoint.sources import repo_root
from ...warning_filters import quiet_run_logger

# The checkout this package runs from (an editable install): configs/ and data/ are there.
REPO_ROOT = str(repo_root())
CODEBASES = ('mmdet', 'mmseg')


def load_config(path: str, cfg_options: dict | None = None):
    """mmengine Config from ``path`` with ``--cfg-options`` merged in."""
    from mmengine.config import Config
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file {path} does not exist; pass a path such as '
                                f'configs/toy/mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
    cfg = Config.fromfile(path)
    if cfg_options:
        from .tool_inputs import check_cfg_options
        check_cfg_options(cfg, cfg_options)
        cfg.merge_from_dict(cfg_options)
    return cfg


def _own_models(codebase: str) -> set:
    importlib.import_module(f'{codebase}.utils').register_all_modules(init_default_scope=False)
    return set(importlib.import_module(f'{codebase}.registry').MODELS.module_dict)


def detect_codebase(cfg) -> str:
    """'mmdet' or 'mmseg': from ``default_scope``, else from the type of ``cfg.model``."""
    scope = cfg.get('default_scope')
    if scope in CODEBASES:
        return scope
    model_type = (cfg.get('model') or {}).get('type')
    found = []
    for codebase in CODEBASES:
        try:
            if model_type in _own_models(codebase):
                found.append(codebase)
        except ImportError:
            continue
    if len(found) == 1:
        return found[0]
    raise ValueError(
        f'cannot tell whether this is an MMDetection or an MMSegmentation config (default_scope='
        f'{scope!r}, model type {model_type!r}). Set default_scope = "mmdet" or "mmseg" in the config '
        f'(the default_runtime.py of either package\'s _base_ does it).')


def setup_codebase(cfg) -> str:
    """Registers all modules of the config's codebase, makes it the default scope, returns it."""
    codebase = detect_codebase(cfg)
    importlib.import_module(f'{codebase}.utils').register_all_modules(init_default_scope=True)
    cfg.default_scope = codebase
    return codebase


def default_work_dir(cfg, config_path: str, work_dir: str | None) -> None:
    """work_dir priority: command line > the config's ``work_dir`` > work_dirs/<config name>."""
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])


def set_local_rank(local_rank: int) -> None:
    """torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK itself."""
    os.environ.setdefault('LOCAL_RANK', str(local_rank))


def _replace_types(node: Any, old: str, new: str) -> int:
    """Replaces every ``type=old`` inside nested dicts/lists by ``new``; returns the count."""
    count = 0
    if isinstance(node, dict):
        if node.get('type') == old:
            node['type'] = new
            count += 1
        for value in node.values():
            count += _replace_types(value, old, new)
    elif isinstance(node, (list, tuple)):
        for value in node:
            count += _replace_types(value, old, new)
    return count


def adapt_to_cpu(cfg) -> None:
    """Settings a distributed run needs when there is no GPU (no effect with CUDA or launcher none).

    gloo instead of nccl; DDP without device_ids (those name GPUs); plain BN instead of SyncBN,
    which torch does not support on CPU. The process group is started here, because mmengine's
    own start-up binds each process to a GPU first.
    """
    launcher = cfg.get('launcher', 'none')
    if launcher == 'none' or torch.cuda.is_available():
        return
    if launcher != 'pytorch':
        raise ValueError(f'--launcher {launcher} needs GPUs (mmengine binds every process to one); '
                         f'for multi-process training on CPUs use torchrun: bash tools/dist_train.sh '
                         f'CONFIG NUM_PROCS (it passes --launcher pytorch).')
    env_cfg = cfg.setdefault('env_cfg', {})
    dist_cfg = env_cfg.setdefault('dist_cfg', {})
    dist_cfg['backend'] = 'gloo'
    wrapper = cfg.get('model_wrapper_cfg') or dict(type='MMDistributedDataParallel')
    wrapper.setdefault('broadcast_buffers', False)
    wrapper.setdefault('find_unused_parameters', cfg.get('find_unused_parameters', False))
    wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper
    if _replace_types(cfg.model, 'SyncBN', 'BN'):
        warnings.warn('no GPU: SyncBN layers are replaced by BN (torch supports SyncBatchNorm on GPUs only); '
                      'batch statistics are per process.', stacklevel=2)
    if cfg.get('sync_bn'):
        cfg.sync_bn = None
    init_cpu_process_group(dist_cfg)


def init_cpu_process_group(dist_cfg: dict) -> None:
    """Starts the gloo process group from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR...)."""
    if dist.is_initialized():
        return
    missing = [k for k in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT') if k not in os.environ]
    if missing:
        raise RuntimeError(f'--launcher pytorch expects torchrun\'s environment variables, {missing} are not '
                           f'set; start the processes with bash tools/dist_train.sh CONFIG NUM_PROCS.')
    kwargs = {k: v for k, v in dist_cfg.items() if k != 'backend'}
    if isinstance(kwargs.get('timeout'), (int, float)):
        kwargs['timeout'] = datetime.timedelta(seconds=kwargs['timeout'])
    dist.init_process_group(backend='gloo', **kwargs)


def build_runner(cfg):
    """The Runner, or the registered runner named by ``cfg.runner_type``; its logger drops mmengine's
    FileClient deprecation notices (:func:`inline_dense.warning_filters.quiet_run_logger`)."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    runner = RUNNERS.build(cfg) if 'runner_type' in cfg else Runner.from_cfg(cfg)
    quiet_run_logger(runner.logger)
    return runner


@contextlib.contextmanager
def loader_workers_ended(runner: Any) -> Iterator[Any]:
    """Yields ``runner``; when the block ends, however it ends, the worker processes of the runner's
    data loaders end too (:func:`end_loader_workers`). A tool run from Python (a notebook, a test) that
    stops on an error otherwise leaves them running: the error's traceback keeps the runner alive, and
    with it ``persistent_workers`` or an ``IterBasedTrainLoop``'s workers, which its ``__init__`` starts
    before training checks anything."""
    try:
        yield runner
    finally:
        end_loader_workers(runner)


def end_loader_workers(runner: Any) -> int:
    """Ends the worker processes of every data loader the runner's built loops hold (train, val, test),
    as the loader does when its iterator is deleted; a loader iterated again starts new ones. Loops the
    runner has not built yet (still config dicts) have none. Returns how many iterators it ended."""
    ended = 0
    for name in ('_train_loop', '_val_loop', '_test_loop'):
        loop = vars(runner).get(name)
        if loop is None or isinstance(loop, dict):
            continue
        loader = getattr(loop, 'dataloader', None)
        iterators = [getattr(loader, '_iterator', None),
                     getattr(getattr(loop, 'dataloader_iterator', None), '_iterator', None)]
        for it in {id(it): it for it in iterators if it is not None}.values():
            shutdown = getattr(it, '_shutdown_workers', None)  # torch's multi-process iterator only
            if shutdown is not None:
                shutdown()
                ended += 1
        if getattr(loader, '_iterator', None) is not None:
            loader._iterator = None  # a persistent loader would otherwise reuse the ended workers
    return ended


class MissingDatasetError(FileNotFoundError):
    """A dataset the config reads is not where the config says. ``key`` is the config key of the
    dataset (``train_dataloader.dataset``), ``toy`` a toy config of the same kind that needs no data."""

    def __init__(self, message: str, key: str = '', toy: str = '') -> None:
        super().__init__(message)
        self.key = key
        self.toy = toy


# What each dataset type's data_root holds and where to get it (the datasets' own sites).
DATASET_HELP = {
    'CocoDataset': ('COCO 2017: annotations/instances_{train,val}2017.json, train2017/, val2017/',
                    'https://cocodataset.org/#download (or mmdet\'s tools/misc/download_dataset.py '
                    '--dataset-name coco2017)',
                    'configs/toy/mask-rcnn_inline-swin-mini_fpn_toy-coco.py'),
    'ADE20KDataset': ('ADE20K (ADEChallengeData2016): images/{training,validation}/, '
                      'annotations/{training,validation}/',
                      'http://sceneparsing.csail.mit.edu/ (ADEChallengeData2016.zip)',
                      'configs/toy/upernet_inline-swin-mini_toy-ade.py'),
}


def _datasets(node: Any, where: str) -> list[tuple[str, dict]]:
    """(config key, dataset dict) of every dataset in a dataloader's dataset, wrappers included."""
    if not isinstance(node, dict):
        return []
    found = [(where, node)] if 'data_root' in node or 'ann_file' in node else []
    found += _datasets(node.get('dataset'), f'{where}.dataset')
    for i, child in enumerate(node.get('datasets') or []):
        found += _datasets(child, f'{where}.datasets.{i}')
    return found


def _missing_path(dataset: dict) -> str | None:
    root = dataset.get('data_root') or ''
    if root and not osp.isdir(root):
        return root
    ann = dataset.get('ann_file')
    if isinstance(ann, str) and ann and not osp.isfile(osp.join(root, ann)):
        return osp.join(root, ann)
    return None


def check_datasets(cfg, loaders: Sequence[str]) -> None:
    """Raises :class:`MissingDatasetError` (the missing path, what it should hold, where to get it,
    which setting points elsewhere) when a dataset of
    ``loaders`` (e.g. ``('train_dataloader', 'val_dataloader')``) is not on disk. Toy datasets,
    which generate their data on first use, are not checked."""
    for loader in loaders:
        for key, dataset in _datasets((cfg.get(loader) or {}).get('dataset'), f'{loader}.dataset'):
            kind = dataset.get('type') if isinstance(dataset.get('type'), str) else ''
            missing = None if kind.startswith('Toy') else _missing_path(dataset)
            if missing is None:
                continue
            holds, source, toy = next((v for k, v in DATASET_HELP.items() if kind.endswith(k)),
                                      (f'the {kind or "dataset"} files', 'the dataset\'s website', 'configs/toy/'))
            root = dataset.get('data_root') or missing
            raise MissingDatasetError(
                f'{missing} does not exist (abspath {osp.abspath(missing)}), and {key} reads its {kind} from there. '
                f'It should hold {holds}: get it from {source} and put or link it at {root.rstrip("/")}, or set '
                f'{key}.data_root (and the other dataloaders\' and evaluators\' paths) to where it is.',
                key=key, toy=toy)


def command_line_advice(exc: BaseException) -> str:
    """What a tool's user can type about ``exc``: the library's errors speak of config keys, the
    tools of ``--cfg-options`` and other commands."""
    if isinstance(exc, MissingDatasetError) and exc.key:
        return (f'On the command line: --cfg-options {exc.key}.data_root=/path/to/data/ (the same for the other '
                f'dataloaders and evaluators). To try the tools without the data, use a toy config, which makes '
                f'its data on first use: python tools/train.py {exc.toy}')
    return ''


def run_tool(main: Callable[[], Any], errors: tuple[type, ...]) -> None:
    """Runs a tool's ``main``; an error of the ``errors`` types ends it with its message and what to type
    about it (:func:`command_line_advice`), without a traceback (exit 1)."""
    try:
        main()
    except errors as exc:
        advice = command_line_advice(exc)
        sys.exit(f'error: {exc}' + (f'\n{advice}' if advice else ''))
