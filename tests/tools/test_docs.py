"""The README and docs/: every relative link resolves (file and heading), and every option the
pages show on a ``tools/*.py`` command line exists in that tool's ``--help``."""
import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from helpers import import_tool

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')
TOOL = re.compile(r'(?<![\w$/])tools/(\w+)\.py\b')
FLAG = re.compile(r'(?<![\w-])--[a-z][a-z0-9-]*')
INLINE_CODE = re.compile(r'`([^`]+)`')


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as '-'."""
    anchors = set()
    in_code = False
    for line in page.read_text(encoding='utf-8').splitlines():
        if line.startswith('```'):
            in_code = not in_code
        elif not in_code and line.startswith('#'):
            title = line.lstrip('#').strip().lower()
            anchors.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
    return anchors


def relative_links(page: Path) -> Iterator[str]:
    in_code = False
    for line in page.read_text(encoding='utf-8').splitlines():
        if line.startswith('```'):
            in_code = not in_code
            continue
        if not in_code:
            for target in LINK.findall(line):
                if not re.match(r'[a-z]+:', target):
                    yield target


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition('#')
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f'{target} (no such file)')
        elif anchor and dest.suffix == '.md' and anchor not in heading_anchors(dest):
            broken.append(f'{target} (no heading #{anchor} in {dest.name})')
    return broken


def command_lines(text: str) -> Iterator[str]:
    """Shell lines of fenced or indented code blocks (continuation lines joined) and the inline
    code spans of the prose (a span may wrap onto the next line)."""
    lines = text.splitlines()
    in_fence = False
    prose: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('```'):
            in_fence = not in_fence
        elif in_fence or line.startswith('    '):
            while line.rstrip().endswith('\\') and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + ' ' + lines[i].strip()
            yield line
        else:
            prose.append(line)
        if in_fence or line.startswith('    ') or not line.strip():
            yield from INLINE_CODE.findall(' '.join(prose))
            prose = []
        i += 1
    yield from INLINE_CODE.findall(' '.join(prose))


def shown_flags(text: str) -> dict[str, set[str]]:
    """tool name -> the options shown after ``tools/<name>.py`` in a command."""
    found: dict[str, set[str]] = {}
    for line in command_lines(text):
        line = line.split(' # ')[0]  # a shell comment is prose
        matches = list(TOOL.finditer(line))
        for m, nxt in zip(matches, [*matches[1:], None]):
            command = line[m.end():nxt.start() if nxt else None]
            found.setdefault(m.group(1), set()).update(FLAG.findall(command))
    return found


def tool_help(name: str) -> str:
    """``tools/<name>.py --help`` run in this process (its parser exits after printing)."""
    module: ModuleType = import_tool(name)
    parse = getattr(module, 'parse_args', None) or module.main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parse(['--help'])
    return out.getvalue()


def all_shown_flags() -> list[tuple[str, list[str]]]:
    merged: dict[str, set[str]] = {}
    for page in PAGES:
        for name, flags in shown_flags(page.read_text(encoding='utf-8')).items():
            merged.setdefault(name, set()).update(flags)
    return sorted((name, sorted(flags)) for name, flags in merged.items() if flags)


@pytest.mark.parametrize('page', PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert not broken_links(page), f'{page.relative_to(ROOT)}: broken links: {broken_links(page)}'


@pytest.mark.parametrize(('name', 'flags'), all_shown_flags(), ids=[n for n, _ in all_shown_flags()])
def test_options_shown_for_a_tool_exist(name, flags):
    assert (ROOT / 'tools' / f'{name}.py').is_file(), f'the docs show tools/{name}.py, which does not exist'
    helptext = tool_help(name)
    missing = [flag for flag in flags if not re.search(rf'(?<![\w-]){re.escape(flag)}(?![\w-])', helptext)]
    assert not missing, f'the docs show {missing} for tools/{name}.py, which its --help does not list'


def test_the_checks_find_a_broken_link_and_a_made_up_option(tmp_path):
    page = tmp_path / 'page.md'
    (tmp_path / 'other.md').write_text('# Other page\n')
    page.write_text('# Title\n[ok](other.md#other-page) [anchor](#title) [bad](missing.md) '
                    '[bad anchor](other.md#nope) [web](https://example.org/x)\n')
    assert broken_links(page) == ['missing.md (no such file)', 'other.md#nope (no heading #nope in other.md)']
    text = ('Run `python tools/train.py CONFIG\n--amp` (see `--elsewhere`).\n\n'
            '    python tools/export_onnx.py CFG \\\n        --out x.onnx  # --not-a-flag\n')
    assert shown_flags(text) == {'train': {'--amp'}, 'export_onnx': {'--out'}}
