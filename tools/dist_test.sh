#!/usr/bin/env bash
# Multi-process testing with torchrun; environment knobs: see tools/dist_launch.sh.
#   bash tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [tools/test.py options...]
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_launch.sh" test "$@"
