"""The sweep's log-log figure: latency and peak memory against input pixels."""
import io
import math
from typing import Any

from ..checkpoint.atomic import write_output


def plot(rows: list[dict[str, Any]], path: str, title: str) -> None:
    """2 x modes grid: latency and peak memory against pixels, log-log, one line per model.

    An InLine model and its softmax counterpart share a colour (solid vs dashed); the dotted
    line through the InLine model's first point grows in proportion to the pixels. Rows that
    failed are left out; a ValueError (one line) when none is left.
    """
    rows = [r for r in rows if not r.get('error')]
    if not rows:
        raise ValueError(f'nothing to plot into {path}: every row failed or there is none')
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    modes = [m for m in ('infer', 'train') if any(r['mode'] == m for r in rows)]
    models = list(dict.fromkeys(r['model'] for r in rows))
    families = list(dict.fromkeys(m[len('inline-'):] if m.startswith('inline-') else m for m in models))
    colours = {f: f'C{i}' for i, f in enumerate(families)}
    sizes = sorted({(r['pixels'], f'{r["height"]}x{r["width"]}') for r in rows})
    fig, axes = plt.subplots(len(modes), 2, figsize=(11, 4.2 * len(modes)), squeeze=False)
    for i, mode in enumerate(modes):
        for j, (key, label) in enumerate((('median_ms', 'latency (ms)'), ('peak_mib', 'peak memory (MiB)'))):
            ax = axes[i][j]
            for model in models:
                pts = sorted((r['pixels'], r[key]) for r in rows
                             if r['model'] == model and r['mode'] == mode and r[key] and not math.isnan(r[key]))
                if not pts:
                    continue
                inline = model.startswith('inline-')
                colour = colours[model[len('inline-'):] if inline else model]
                ax.plot([p for p, _ in pts], [v for _, v in pts], '-' if inline else '--', marker='o',
                        label=model, color=colour)
                if inline:
                    p0, v0 = pts[0]
                    ax.plot([p for p, _ in pts], [v0 * p / p0 for p, _ in pts], ':', color=colour,
                            alpha=0.5, linewidth=1)
            _log_axes(ax, sizes, label)
            ax.set_title(f'{mode}: {label.split(" (")[0]}')
    fig.suptitle(title + '\n(solid: InLine, dashed: softmax; dotted: growth proportional to pixels)', fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=72)
    plt.close(fig)
    try:  # a 64-colour palette keeps the PNG small enough to commit
        from PIL import Image
        buffer.seek(0)
        small = io.BytesIO()
        Image.open(buffer).convert('RGB').quantize(colors=64).save(small, format='png', optimize=True)
        buffer = small
    except ImportError:
        pass
    write_output(path, buffer.getvalue())


def _log_axes(ax: Any, sizes: list[Any], label: str) -> None:
    """Log-log axes ticked at the measured sizes, plain numbers on y, grid and legend."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xticks([p for p, _ in sizes])
    # neighbouring sizes with similar pixel counts get their labels on a second line
    labels = [s if k == 0 or p > 1.4 * sizes[k - 1][0] else '\n' + s for k, (p, s) in enumerate(sizes)]
    ax.set_xticklabels(labels, fontsize=8)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel('input size (log pixels)')
    ax.set_ylabel(label)
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=8)

