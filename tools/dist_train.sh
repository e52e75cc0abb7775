#!/usr/bin/env bash
# Multi-process training with torchrun; environment knobs: see tools/dist_launch.sh.
#   bash tools/dist_train.sh CONFIG NUM_PROCS [tools/train.py options...]
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_launch.sh" train "$@"
