#!/bin/sh
# srun_stub.sh — stands in for Slurm's srun in tests/integration/test_recipes.c
# (installed as `srun` on PATH): runs `srun --ntasks=N [--opt...] CMD ARGS...`
# as N local copies of CMD with the environment a real srun gives each
# task (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID), waits for
# all, and exits non-zero if any failed. Options other than --ntasks are
# accepted and ignored, as long as they are written --name=value.
set -u
n=1
while [ $# -gt 0 ]; do
	case "$1" in
	--ntasks=*) n=${1#--ntasks=} ;;
	-n) n=$2; shift ;;
	--*=* | --*) ;;
	*) break ;;
	esac
	shift
done
[ $# -ge 1 ] || { echo "srun_stub: no command" >&2; exit 2; }
pids=""
i=0
while [ $i -lt "$n" ]; do
	SLURM_PROCID=$i SLURM_NTASKS=$n SLURM_LOCALID=0 SLURM_NODEID=$i "$@" &
	pids="$pids $!"
	i=$((i + 1))
done
rc=0
for p in $pids; do
	wait "$p" || rc=1
done
exit $rc
