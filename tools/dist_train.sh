#!/usr/bin/env bash
# Multi-process training with torchrun: one process per GPU (or per CPU worker without GPUs).
#
#   bash tools/dist_train.sh CONFIG NUM_PROCS [tools/train.py options...]
#
# Several machines: run it on each with the same MASTER_ADDR/PORT and NNODES, NODE_RANK=0..N-1.
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (29500),
#              PYTHON (the active venv's python, else ./.venv/bin/python, else python3).
# Without GPUs the processes use the gloo backend (tools/train.py switches to it).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: bash $0 CONFIG NUM_PROCS [train.py options...]" >&2
  exit 2
fi
CONFIG=$1
NPROC=$2
shift 2

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ]; then PYTHON="$VIRTUAL_ENV/bin/python"
  elif [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"
  else PYTHON=python3; fi
fi

PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m torch.distributed.run \
  --nnodes="${NNODES:-1}" \
  --node_rank="${NODE_RANK:-0}" \
  --master_addr="${MASTER_ADDR:-127.0.0.1}" \
  --master_port="${PORT:-29500}" \
  --nproc_per_node="$NPROC" \
  "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "$@"
