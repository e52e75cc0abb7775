"""Puts this checkout first on ``sys.path`` for the development commands (``gpu_check.py``,
``make_configs.py``), which import ``inline_dense_dev``: the checkout's development package, never
installed. Imported first by them; the one ``sys.path`` edit in tools/ (the user's commands import
only the installed ``inline_dense``)."""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
