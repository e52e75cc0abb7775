"""Runs the check's steps in order, each in a fresh worker process under its time budget, and
records every row as it arrives: a failing or hanging step is recorded and the next one runs."""
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from .plan import CheckPlan
from .results import Results
from .worker import PREFIX

MIN_STEP_SECONDS = 5


def worker_env(plan: CheckPlan, extra_paths: Sequence[str], repo_root: str) -> dict[str, str]:
    """The worker's environment: the carried packages and this checkout first on the path; no
    GPU visible to a CPU run; matplotlib without a display."""
    env = dict(os.environ, PYTHONUNBUFFERED='1', MPLBACKEND='Agg')
    paths = [*extra_paths, repo_root] + ([env['PYTHONPATH']] if env.get('PYTHONPATH') else [])
    env['PYTHONPATH'] = os.pathsep.join(paths)
    if plan.device == 'cpu':
        env['CUDA_VISIBLE_DEVICES'] = ''
    return env


def run_step(step: str, plan: CheckPlan, results: Results, budget: float, env: dict[str, str]) -> None:
    """One worker: its rows go into ``results`` as they come, its other output to stdout; killed
    (with its children) after ``budget`` seconds."""
    t0 = time.time()
    results.step(step)
    results.save()
    cmd = [sys.executable, '-m', 'inline_dense_dev.gpu_check.worker', step, json.dumps(plan.to_json())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    tail: collections.deque[str] = collections.deque(maxlen=4)

    def read() -> None:
        for line in proc.stdout:
            if line.startswith(PREFIX):
                results.add_row(step, json.loads(line[len(PREFIX):]))
            else:
                print(line, end='', flush=True)
                if line.strip():
                    tail.append(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    error = ''
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        error = f'timed out after {budget:.0f} s (its budget); the rows above were measured before'
    reader.join(timeout=10)
    if not error and proc.returncode:
        error = f'worker exit code {proc.returncode}: ' + ' | '.join(tail)
    results.finish(step, time.time() - t0, error)
    print(f'[gpu_check] {step}: {results.step(step)["status"]} in {time.time() - t0:.0f} s', flush=True)


def run_check(plan: CheckPlan, steps: Sequence[str], results: Results, time_limit: float,
              repo_root: str, extra_paths: Sequence[str] = (), started: float | None = None) -> bool:
    """Every step in order within ``time_limit`` seconds from ``started``; True when all passed."""
    deadline = (started or time.time()) + time_limit
    env = worker_env(plan, extra_paths, repo_root)
    for step in steps:
        budget = min(plan.budgets[step], deadline - time.time())
        if budget < MIN_STEP_SECONDS:
            results.step(step)
            results.finish(step, 0.0, f'not run: the check\'s time limit ({time_limit:.0f} s) was reached')
            continue
        print(f'[gpu_check] {step} (budget {budget:.0f} s)', flush=True)
        run_step(step, plan, results, budget, env)
    return all(entry['status'] == 'ok' for entry in results.payload['steps'].values())
