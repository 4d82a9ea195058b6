#!/bin/sh
# slurm.sh — a single-node Slurm cluster of our own, for the tests
# (tests/integration/test_slurm.c, `make test-slurm`): Debian's slurm-wlm
# and munge, every file in one temporary folder, every daemon started and
# stopped by its PID (no system service is used or started).
#
#   tests/slurm.sh up DIR     DIR must not exist; prints SLURM_CONF=DIR/slurm.conf
#   tests/slurm.sh down DIR   stops munged, slurmctld and slurmd of DIR, by PID
#                             (idempotent), and removes DIR
#
# Exit 77 with one line saying why when this machine cannot run one (the
# test skips); anything else non-zero is a failure. The settings avoid what
# a container lacks: proctrack/linuxproc (no cgroups), task/none (no
# affinity), no accounting. Ports come from this script's pid: parallel
# test runs do not collide.
set -u

die() { echo "slurm.sh: $*" >&2; exit 1; }
skip() { echo "slurm.sh: $*" >&2; exit 77; }

stop_pidfile() {
	[ -s "$1" ] || return 0
	pid=$(cat "$1")
	case "$pid" in *[!0-9]* | "") return 0 ;; esac
	kill "$pid" 2>/dev/null || return 0
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	kill -9 "$pid" 2>/dev/null
	return 0
}

down() {
	dir=$1
	[ -d "$dir" ] || return 0
	# the jobs first: slurmd kills its steps when it stops, slurmctld forgets them
	stop_pidfile "$dir/slurmd.pid"
	stop_pidfile "$dir/slurmctld.pid"
	stop_pidfile "$dir/munge/munged.pid"
	rm -rf "$dir"
}

wait_for() { # seconds, command...
	n=$(($1 * 10))
	shift
	while [ $n -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

up() {
	dir=$1
	for b in munged slurmctld slurmd sbatch srun sinfo scancel; do
		command -v $b >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v $b >/dev/null 2>&1 ||
			skip "$b is not installed: run \`make deps\` (installs slurm-wlm and munge)"
	done
	PATH=$PATH:/usr/sbin
	[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs (this is uid $(id -u))"
	[ ! -e "$dir" ] || die "$dir exists"
	mkdir -p "$dir/state" "$dir/spool" "$dir/munge" || die "cannot create $dir"
	chmod 700 "$dir/munge"
	head -c 1024 /dev/urandom >"$dir/munge/munge.key"
	chmod 600 "$dir/munge/munge.key"
	munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
		--pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
		--seed-file="$dir/munge/munged.seed" --force ||
		{ down "$dir"; die "munged did not start (see its log above)"; }
	base=$((20000 + ($$ % 400) * 25))
	node=$(hostname)
	cat >"$dir/slurm.conf" <<EOF
ClusterName=kbtest$$
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SrunPortRange=$((base + 2))-$((base + 24))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=kb Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
	export SLURM_CONF="$dir/slurm.conf"
	slurmctld -f "$SLURM_CONF" || { tail -5 "$dir/slurmctld.log" >&2; down "$dir"; die "slurmctld did not start"; }
	wait_for 20 test -s "$dir/slurmctld.pid" || { down "$dir"; die "slurmctld wrote no pid"; }
	slurmd -f "$SLURM_CONF" || { tail -5 "$dir/slurmd.log" >&2; down "$dir"; die "slurmd did not start"; }
	# the node is up once sinfo reports it idle
	if ! wait_for 30 sh -c "sinfo -h -o %T | grep -q idle"; then
		tail -5 "$dir/slurmd.log" "$dir/slurmctld.log" >&2
		down "$dir"
		die "the node never became idle"
	fi
	echo "SLURM_CONF=$SLURM_CONF"
}

case "${1:-}" in
up) [ $# -eq 2 ] || die "usage: slurm.sh up DIR"; up "$2" ;;
down) [ $# -eq 2 ] || die "usage: slurm.sh down DIR"; down "$2" ;;
*) die "usage: slurm.sh up|down DIR" ;;
esac
