"""The README's main job (tools/demo_toy.py) starts without warnings from the imports it triggers
(setuptools' ``pkg_resources is deprecated`` through mmengine, mmcv's ImportWarning), even under
``-W default``; the filters that silence them name each warning and nothing else."""
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from inline_dense import warning_filters

pytestmark = pytest.mark.stack  # CI repeats its end-to-end runs on the second stack

ROOT = Path(__file__).resolve().parents[2]

# What tools/demo_toy.py does before training: import the tool, read the default toy config (its
# mmdet:: bases make mmengine look packages up with pkg_resources), register mmdet, build the Runner.
def main_job_start(work_dir: Path) -> str:
    return f'''
import sys
sys.path.insert(0, {str(ROOT / 'tools')!r})
sys.argv = ['demo_toy.py']
import demo_toy
from inline_dense.openmmlab.engine.launch import build_runner, load_config, setup_codebase
cfg = load_config(demo_toy.DEFAULT_CONFIG)
setup_codebase(cfg)
cfg.work_dir = {str(work_dir)!r}
cfg.log_level = 'WARNING'
build_runner(cfg)
print('started')
'''


@pytest.mark.slow
def test_the_main_job_starts_without_warnings(tmp_path):
    code = main_job_start(tmp_path / 'work')
    res = subprocess.run([sys.executable, '-W', 'default', '-c', code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert 'started' in res.stdout, res.stderr[-3000:]
    noise = [line for line in res.stderr.splitlines() if 'Warning:' in line]
    assert not noise, '\n'.join(noise)


def test_the_filters_name_each_warning_and_nothing_else():
    warning_filters.install()
    message = 'pkg_resources is deprecated as an API. See https://setuptools.pypa.io/'
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        warning_filters.install()  # after simplefilter: in front of it, as on import
        for module in ('mmengine.utils.package_utils', 'importlib'):
            warnings.warn_explicit(message, UserWarning, 'x.py', 1, module=module)
        warnings.warn_explicit(message, UserWarning, 'x.py', 1, module='my_code')  # another module
        warnings.warn_explicit(message, DeprecationWarning, 'x.py', 1, module='importlib')  # another category
        warnings.warn_explicit('something else', UserWarning, 'x.py', 1, module='mmengine.utils.package_utils')
        warnings.warn_explicit('``MultiScaleDeformableAttention`` has been moved to ``mmcv.ops``', ImportWarning,
                               'x.py', 1, module='mmcv.cnn.bricks.transformer')
    shown = [(w.category.__name__, str(w.message)[:20]) for w in seen]
    assert shown == [('UserWarning', message[:20]), ('DeprecationWarning', message[:20]),
                     ('UserWarning', 'something else')]


def test_the_run_logger_drops_mmengine_file_client_notices_only(tmp_path):
    """mmengine's CheckpointHook builds a FileClient in every run, which logs two deprecation
    notices through the run's logger; a Runner built by the tools drops exactly those."""
    import logging

    from mmengine.fileio import FileClient
    from mmengine.logging import MMLogger, print_log
    logger = MMLogger.get_instance(f'quiet-{tmp_path.name}')
    warning_filters.quiet_run_logger(logger)
    warning_filters.quiet_run_logger(logger)  # idempotent
    assert sum(isinstance(f, warning_filters.KnownLogNotices) for f in logger.filters) == 1
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    logger.addHandler(handler)
    try:
        FileClient.infer_client(None, str(tmp_path))  # the two notices, through the current logger
        print_log('"FileClient" will be deprecated in future.', logger=logger, level=logging.INFO)
        print_log('a warning of the run itself', logger=logger, level=logging.WARNING)
    finally:
        logger.removeHandler(handler)
    assert [(r.levelno, r.getMessage()[:20]) for r in seen] == [
        (logging.INFO, '"FileClient" will be'), (logging.WARNING, 'a warning of the run')]


def test_the_tools_runner_has_the_filter(tmp_path, toy_dir, monkeypatch):
    from inline_dense.openmmlab.engine.launch import build_runner, load_config, setup_codebase
    monkeypatch.chdir(toy_dir)
    cfg = load_config(str(ROOT / 'configs/toy/fpn_inline-pvt-mini_toy-ade.py'))
    setup_codebase(cfg)
    cfg.work_dir = str(tmp_path / 'work')
    runner = build_runner(cfg)
    assert any(isinstance(f, warning_filters.KnownLogNotices) for f in runner.logger.filters)
