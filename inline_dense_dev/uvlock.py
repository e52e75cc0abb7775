"""uv.lock, read: the one reader of the lock outside uv (standard library only).

Its users: the compiled mmcv's build (:mod:`.setup.mmcv_full`: mmcv's version and source), the GPU
check's wheel folder (:mod:`inline_dense_dev.gpu_check.wheels`: the requirement closure) and CI
(.ci/core_only.sh: the versions the newest core run installs). ``python -m inline_dense_dev.uvlock
NAME...`` prints ``NAME==VERSION`` for packages locked at one version.
"""
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(__file__).resolve().parents[1] / 'uv.lock'


class LockError(RuntimeError):
    """The lock does not hold what is asked; the message says what to do."""


@dataclass(frozen=True)
class Dependency:
    name: str
    version: str | None      # set when the lock holds several versions of ``name``
    marker: str                 # '' when unconditional; uv's markers, its conflict extras included
    extras: tuple[str, ...]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    dependencies: tuple[Dependency, ...]
    optional: dict[str, tuple[Dependency, ...]]   # the package's own extras
    wheels: tuple[dict[str, object], ...]         # url, hash ('sha256:...'), size
    sdist: dict[str, object] | None


def _deps(entries: list) -> tuple[Dependency, ...]:
    return tuple(Dependency(d['name'], d.get('version'), d.get('marker', ''), tuple(d.get('extra', ())))
                 for d in entries)


def read(path: Path = LOCK) -> dict[str, list[Package]]:
    """Every locked package by (normalised) name; most names hold one version, a few one per Python."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding='utf-8'))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LockError(f'cannot read {path} ({exc}): restore it from git, or regenerate it with `uv lock`') from exc
    packages: dict[str, list[Package]] = {}
    for entry in data.get('package', []):
        optional = {extra: _deps(deps) for extra, deps in entry.get('optional-dependencies', {}).items()}
        packages.setdefault(entry['name'], []).append(Package(
            entry['name'], entry['version'], _deps(entry.get('dependencies', [])), optional,
            tuple(entry.get('wheels', ())), entry.get('sdist')))
    return packages


def package(name: str, packages: dict[str, list[Package]] | None = None, version: str | None = None) -> Package:
    """The locked ``name`` (at ``version`` when the lock holds several)."""
    found = [p for p in (read() if packages is None else packages).get(name, []) if version in (None, p.version)]
    if len(found) != 1:
        raise LockError(f'uv.lock holds {len(found)} versions of {name}{"==" + version if version else ""} '
                        '(one expected): name it in pyproject.toml, then run `uv lock`')
    return found[0]


if __name__ == '__main__':
    print(' '.join(f'{name}=={package(name).version}' for name in sys.argv[1:]))
