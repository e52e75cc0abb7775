"""The torch-only core, checked in an environment with only torch, torchvision and numpy
(``.ci/core_only.sh`` makes it and runs this from outside the repository).

``python core_only_check.py [--quick] FIXTURES_DIR [REPO_DIR]``: imports ``inline_dense.models`` (from the
installed package, not the checkout REPO_DIR), builds every preset and runs it on odd input sizes
(checking each stage's shape), loads every authors'-layout fixture through the core loader from a
path, an http URL and an ``inline://`` name (both served by a local HTTP server, through the
download code and the cache) and matches the reference per-stage outputs; then asserts that no
module of OpenMMLab or timm was imported. Prints one line per check; exits non-zero on a failure.
``--quick`` builds each family's smallest preset only (the test suite's run, tests/test_core_only.py).
"""
import functools
import http.server
import math
import os
import sys
import tempfile
import threading
import time

FORBIDDEN = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'timm')
TOL = 1e-5
ODD_SIZES = ((65, 97), (33, 31))


def say(text: str) -> None:
    print(f'[core-only] {text}', flush=True)


def forbidden_modules() -> list:
    return sorted(m for m in sys.modules if m.split('.')[0] in FORBIDDEN)


def build_reference(ref: dict):
    """Our backbone with the arch the authors' model of ``ref`` was built with (its family spec's
    ``fixture``): every output, no output norm (the reference holds each raw output)."""
    from inline_dense import registry
    from inline_dense.families import backbone_class
    spec = registry.family(ref['kind'])
    return backbone_class(spec)(**spec.fixture.backbone_kwargs(ref['arch']))


def max_error(torch, model, ref: dict) -> float:
    worst = 0.0
    with torch.no_grad():
        for case in ref['cases']:
            outs = model.eval()(case['input'])
            assert len(outs) == len(case['stages']), (len(outs), len(case['stages']))
            for out, expected in zip(outs, case['stages']):
                assert out.shape == expected.shape, (tuple(out.shape), tuple(expected.shape))
                worst = max(worst, (out - expected).abs().max().item())
    return worst


def serve(directory: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f'http://127.0.0.1:{server.server_address[1]}'


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def check_presets(torch, quick: bool) -> None:
    from inline_dense import registry
    from inline_dense.families import backbone_class
    for cls in (backbone_class(spec) for spec in registry.FAMILIES.values()):
        for arch in list(cls.arch_zoo)[:1] if quick else cls.arch_zoo:
            t0 = time.time()
            model = cls(arch).eval()
            shapes = []
            with torch.no_grad():
                for h, w in ODD_SIZES:
                    outs = model(torch.randn(1, 3, h, w))
                    want = [(1, model.embed_dims[i], math.ceil(h / model.strides[i]), math.ceil(w / model.strides[i]))
                            for i in model.out_indices]
                    got = [tuple(o.shape) for o in outs]
                    assert got == want, (cls.__name__, arch, (h, w), got, want)
                    assert all(torch.isfinite(o).all() for o in outs), (cls.__name__, arch, (h, w))
                    shapes.append(f'{h}x{w} -> {[g[2:] for g in got]}')
            params = sum(p.numel() for p in model.parameters()) / 1e6
            say(f'{cls.__name__}({arch!r}): {params:.1f} M parameters, {"; ".join(shapes)} ({time.time() - t0:.1f} s)')
            del model


def check_fixtures(torch, fixtures: str) -> None:
    from inline_dense import registry
    from inline_dense.checkpoint import load_pretrained, sources
    server, base = serve(fixtures)
    try:
        for spec in registry.FAMILIES.values():
            variant = spec.fixture.name
            ref = torch.load(os.path.join(fixtures, f'{variant}_reference.pt'), weights_only=True)
            path = os.path.join(fixtures, f'{variant}_authors_layout.pth')
            family = spec.weights[0].name  # its smallest published variant: inline:// serves the fixture
            # the published name points at the local server: inline:// goes through download and cache
            sources.PUBLISHED[family] = sources.PUBLISHED[family]._replace(url=f'{base}/{variant}_authors_layout.pth')
            errors: dict[str, float] = {}
            for how, source in (('path', path), ('url', f'{base}/{variant}_authors_layout.pth'),
                                ('inline', f'inline://{family}')):
                model = build_reference(ref)
                load_pretrained(model, source)
                errors[how] = max_error(torch, model, ref)
            say(f'{variant}: max |ours - authors| per load ' + ', '.join(f'{k} {v:.1e}' for k, v in errors.items()))
            assert max(errors.values()) < TOL, (variant, errors, TOL)
            fresh = build_reference(ref)
            assert max_error(torch, fresh, ref) > 1e-2, f'{variant}: random weights match too: the check is void'
    finally:
        server.shutdown()


def main(argv: list) -> int:
    quick = '--quick' in argv
    argv = [a for a in argv if a != '--quick']
    if not 1 <= len(argv) <= 2:
        sys.exit(__doc__)
    fixtures = os.path.abspath(argv[0])
    repo = os.path.abspath(argv[1]) if len(argv) > 1 else None
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    import inline_dense.models as models
    t2 = time.perf_counter()
    say(f'import torch {t1 - t0:.2f} s, then import inline_dense.models {t2 - t1:.3f} s, '
        f'from {os.path.dirname(models.__file__)}')
    if repo is not None:
        assert not os.path.abspath(models.__file__).startswith(repo + os.sep), \
            f'inline_dense was imported from the checkout {repo}, not from the installed package'
    assert not forbidden_modules(), f'importing the core imported {forbidden_modules()}'
    torch.manual_seed(0)
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    check_presets(torch, quick)
    with tempfile.TemporaryDirectory(prefix='inline_dense-core-only-') as cache:
        os.environ['INLINE_DENSE_CACHE'] = cache  # the URL / inline:// downloads land here, not in ~/.cache
        check_fixtures(torch, fixtures)
    left = forbidden_modules()
    assert not left, f'the core imported {left}'
    say(f'ok: no module of {", ".join(FORBIDDEN)} imported ({time.perf_counter() - t0:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
