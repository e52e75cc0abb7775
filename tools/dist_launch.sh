#!/usr/bin/env bash
# torchrun for tools/train.py or tools/test.py, behind dist_train.sh / dist_test.sh:
# one process per GPU (or per CPU worker without GPUs, with the gloo backend, which the
# tools switch to).
#
#   bash tools/dist_launch.sh train CONFIG NUM_PROCS [train.py options...]
#   bash tools/dist_launch.sh test CONFIG CHECKPOINT NUM_PROCS [test.py options...]
#
# Several machines: run it on each with the same MASTER_ADDR/PORT and NNODES, NODE_RANK=0..N-1.
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (29500),
#              PYTHON (the active venv's python, else ./.venv/bin/python, else python3).
set -euo pipefail

TOOL=${1:-}
shift || true
case "$TOOL" in
  train) npos=2; usage="CONFIG NUM_PROCS [train.py options...]" ;;
  test) npos=3; usage="CONFIG CHECKPOINT NUM_PROCS [test.py options...]" ;;
  *) echo "usage: bash $0 train|test ..." >&2; exit 2 ;;
esac
if [ $# -lt "$npos" ]; then
  echo "usage: bash tools/dist_$TOOL.sh $usage" >&2
  exit 2
fi
positional=("${@:1:npos-1}")
NPROC=${!npos}
shift "$npos"
if ! [[ "$NPROC" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: NUM_PROCS must be a whole number of processes, 1 or more (got '$NPROC'): bash tools/dist_$TOOL.sh $usage" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ]; then PYTHON="$VIRTUAL_ENV/bin/python"
  elif [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"
  else PYTHON=python3; fi
fi

exec "$PYTHON" -m torch.distributed.run \
  --nnodes="${NNODES:-1}" \
  --node_rank="${NODE_RANK:-0}" \
  --master_addr="${MASTER_ADDR:-127.0.0.1}" \
  --master_port="${PORT:-29500}" \
  --nproc_per_node="$NPROC" \
  "$ROOT/tools/$TOOL.py" "${positional[@]}" --launcher pytorch "$@"
