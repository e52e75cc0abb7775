"""What pip, PyPI and ``pip show`` say about the package: the wheel's summary (pyproject.toml's
``description``) names either none of the families or all of them, so it cannot fall behind the registry."""
import re
import tomllib
from pathlib import Path

from inline_dense import registry

PYPROJECT = Path(__file__).resolve().parents[1] / 'pyproject.toml'


def test_the_wheel_summary_names_every_family_or_none():
    summary = tomllib.loads(PYPROJECT.read_text())['project']['description']
    titles = sorted(spec.title for spec in registry.FAMILIES.values())
    named = [t for t in titles if re.search(rf'\b{re.escape(t)}\b', summary, re.IGNORECASE)]
    assert named in ([], titles), f'the summary names {named} of {titles}: name all of them or none'
