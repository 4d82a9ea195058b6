#!/bin/sh
# run.sh — a kernbench run across hosts launched by OpenMPI's mpirun as one
# MPMD job: MPI process 0 is the coordinator (`kernbench run ... --hosts`),
# processes 1..N are the agents, one per host of the hosts file; an agent
# takes its index from OMPI_COMM_WORLD_RANK (process k + 1 is host k).
#
#   deploy/mpi/run.sh HOSTFILE HOSTS.yaml KEYS WORKLOAD [run options...]
#
# HOSTFILE  mpirun's hostfile: the coordinator's machine first (see
#           hostfile.example); --map-by node puts process k on line k+1
# HOSTS     the hosts file (hosts.yaml.example): `coordinator:` is an
#           address of the first machine, where agents connect
# KEYS      from `kernbench keygen --out KEYS`, readable at the same path on
#           every machine (a shared folder, or copied there with mode 0600)
#
# Environment: KERNBENCH (default `kernbench` on PATH, the same path on
# every machine), MPIRUN (default mpirun), MPIRUN_ARGS (more mpirun options;
# as root on one machine: "--allow-run-as-root --oversubscribe").
set -eu

usage() {
	echo "usage: deploy/mpi/run.sh HOSTFILE HOSTS.yaml KEYS WORKLOAD [run options...]" >&2
	exit 2
}

[ $# -ge 4 ] || usage
hostfile=$1 hosts=$2 keys=$3
shift 3
for f in "$hostfile" "$hosts" "$keys"; do
	[ -r "$f" ] || { echo "deploy/mpi/run.sh: cannot read $f" >&2; exit 2; }
done
coordinator=$(sed -n 's/^coordinator:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$hosts")
agents=$(grep -c '^[[:space:]]*-[[:space:]]*ranks:' "$hosts" || true)
[ -n "$coordinator" ] || { echo "deploy/mpi/run.sh: $hosts has no coordinator: line" >&2; exit 2; }
[ "$agents" -ge 1 ] || { echo "deploy/mpi/run.sh: $hosts lists no host (- ranks: [...])" >&2; exit 2; }
kernbench=${KERNBENCH:-kernbench}

# --bind-to none: mpirun would pin each process (and so every daemon an
# agent spawns) to one core. Processes get no stdin (</dev/null): the
# coordinator reads none, and mpirun would forward ours.
# shellcheck disable=SC2086 # MPIRUN_ARGS is a list of options
exec ${MPIRUN:-mpirun} --hostfile "$hostfile" --map-by node --bind-to none ${MPIRUN_ARGS:-} \
	-np 1 "$kernbench" run "$@" --hosts "$hosts" --keys "$keys" : \
	-np "$agents" "$kernbench" agent --coordinator "$coordinator" --keys "$keys" </dev/null
