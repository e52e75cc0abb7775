"""The habits .ci/run and .pre-commit-config.yaml hold the repository to: the same ruff and mypy in
both, and commit messages of a short subject line, a blank line and a body."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / '.ci'))
import commit_msg  # noqa: E402


@pytest.mark.parametrize(('message', 'complaint'), [
    ('setup: one settings object\n\nRead once from the environment.\n', None),
    ('setup: one settings object\n\nBody.\n# a comment git strips\n\n', None),
    ('x' * 73 + '\n\nBody.\n', 'has 73 characters'),
    ('setup: one settings object\n', 'a blank line, then a body'),
    ('setup: one settings object\nno blank line\n', 'a blank line, then a body'),
    ('\n\n# only comments\n', 'the message is empty'),
])
def test_commit_messages(tmp_path, message, complaint):
    found = commit_msg.problems(message)
    assert (not found) if complaint is None else any(complaint in f for f in found), found
    path = tmp_path / 'COMMIT_EDITMSG'
    path.write_text(message)
    proc = subprocess.run([sys.executable, str(ROOT / '.ci' / 'commit_msg.py'), str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == (0 if complaint is None else 1), proc.stderr


def test_pre_commit_runs_the_checks_ci_runs():
    hooks = {h['id']: h for repo in yaml.safe_load((ROOT / '.pre-commit-config.yaml').read_text())['repos']
             for h in repo['hooks']}
    run = (ROOT / '.ci' / 'run').read_text(encoding='utf-8')
    for tool in ('ruff check', 'mypy'):
        assert f'-m {tool}' in run, tool
        assert any(f'python -m {tool}' in h['entry'] for h in hooks.values()), tool
    assert hooks['commit-message']['stages'] == ['commit-msg']
