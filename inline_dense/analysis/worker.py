"""Subprocess end of the benchmark's worker protocol (see :mod:`inline_dense.analysis.jobs`).

``python -m inline_dense.analysis.worker '{job json}'`` measures one job and prints its row
as a ``RESULT {json}`` line; a failure is reported as an error row rather than a crash.
"""
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .jobs import RESULT_PREFIX, Job, measure_job


def run_worker(spec_json: str, measure: Callable[[Job], dict[str, Any]] | None = None) -> None:
    """Measures the job given as JSON and prints its row (an error row if it raised); ``measure``
    replaces the model zoo's measurement (the scaling figure's models, :mod:`.scaling`)."""
    job = Job(**json.loads(spec_json))
    try:
        row = measure(job) if measure is not None else measure_job(job).to_dict()
    except Exception as err:  # reported in the table instead of killing the sweep
        traceback.print_exc()
        row = job.error_row(f'{type(err).__name__}: {err}')
    print(RESULT_PREFIX + json.dumps(row), flush=True)


def main(argv: Sequence[str]) -> None:
    if len(argv) != 1:
        sys.exit('usage: python -m inline_dense.analysis.worker JOB_JSON')
    run_worker(argv[0])


if __name__ == '__main__':
    main(sys.argv[1:])
