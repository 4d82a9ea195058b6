#!/bin/sh
# netns.sh — network namespaces standing in for hosts, for the multi-host
# tests (tests/integration/test_netns.c) and bench/hosts_bench.c.
#
#   netns.sh probe          exit 0 if namespaces, veth and bridges work
#                           here, else one line on stderr saying why
#   netns.sh up ID N        N namespaces kb-ID-h0 .. kb-ID-h<N-1>, each with
#                           lo and one veth "kb0" at 10.77.0.<i+1>/24, all
#                           joined by the bridge kbIDb in the root namespace
#   netns.sh down ID        kill every process inside them, delete their
#                           links and the namespaces (idempotent: safe to run
#                           twice, or on a half-built set)
#   netns.sh sweep          `down` every set whose owner is gone
#
# ID is the owner's pid followed by a letter (e.g. 4242a): unique per run on
# this machine, so parallel runs never collide, and a set whose owner died
# (a test killed on timeout) is found and removed by the next `up`.
# Interface names stay within 15 bytes: "kb" + ID (<= 8) + "b"/"p<i>".
# The addresses exist only inside the namespaces, so every set can use the
# same 10.77.0.0/24 without clashing with another set or with the machine.
set -u

die() {
	echo "netns.sh: $*" >&2
	exit 1
}

check_id() {
	case "$1" in
	'' | *[!0-9a-z]*) die "bad id \"$1\": expected a pid and a letter, e.g. 4242a" ;;
	esac
	[ ${#1} -le 9 ] || die "id \"$1\" is longer than 9 characters (interface names are 15 at most)"
}

namespaces_of() {
	ip netns list 2>/dev/null | awk '{print $1}' | grep "^kb-$1-h" || true
}

probe() {
	local p id ns ok
	command -v ip >/dev/null || die "no \`ip\` command (iproute2)"
	[ "$(id -u)" = 0 ] || die "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"
	p="probe$$"
	id="$$z"
	ns="kb-$p"
	ip netns add "$ns" 2>/dev/null || die "cannot create a network namespace (ip netns add failed)"
	ok=0
	if ip link add "kb${id}b" type bridge 2>/dev/null; then
		ip link add "kb${id}p" type veth peer name kb0 netns "$ns" 2>/dev/null && ok=1
		ip link del "kb${id}p" 2>/dev/null
		ip link del "kb${id}b" 2>/dev/null
	fi
	ip netns del "$ns"
	[ $ok = 1 ] || die "cannot create a bridge and veth pair (ip link add failed)"
}

# Functions keep their variables local: `up` calls `sweep`, which walks
# other sets' ids, and must not hand one of them back to `up`.
up() {
	local id="$1" n="$2" br ns i
	check_id "$id"
	case "$n" in '' | *[!0-9]*) die "bad host count \"$n\"" ;; esac
	[ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "host count $n out of range 1..32"
	sweep
	down "$id"
	br="kb${id}b"
	ip link add "$br" type bridge || { down "$id"; die "cannot create bridge $br"; }
	ip link set "$br" up || { down "$id"; die "cannot bring $br up"; }
	i=0
	while [ $i -lt "$n" ]; do
		ns="kb-$id-h$i"
		if ! { ip netns add "$ns" &&
			ip link add "kb${id}p$i" type veth peer name kb0 netns "$ns" &&
			ip link set "kb${id}p$i" master "$br" up &&
			ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev kb0 &&
			ip -n "$ns" link set kb0 up &&
			ip -n "$ns" link set lo up; }; then
			down "$id"
			die "cannot set up namespace $ns"
		fi
		i=$((i + 1))
	done
}

# Processes first (a process keeps a deleted namespace alive), then the
# root-side veth ends (deleting one removes its pair at once, where a
# namespace's own links go away only later, asynchronously), then the
# namespaces and the bridge.
down() {
	local id="$1" ns pids try l
	check_id "$id"
	for ns in $(namespaces_of "$id"); do
		for try in 1 2 3 4 5 6 7 8 9 10; do
			pids=$(ip netns pids "$ns" 2>/dev/null)
			[ -z "$pids" ] && break
			kill -9 $pids 2>/dev/null
			sleep 0.1
		done
	done
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
		grep "^kb${id}[bp]"); do
		ip link del "$l" 2>/dev/null
	done
	for ns in $(namespaces_of "$id"); do
		ip netns del "$ns" 2>/dev/null
	done
	return 0
}

sweep() {
	local id owner l
	for id in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^kb-\([0-9]*[a-z]\)-h[0-9]*$/\1/p' |
		sort -u); do
		owner=${id%?}
		[ -d "/proc/$owner" ] || down "$id"
	done
	# a bridge or veth end whose namespaces are already gone
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
		grep '^kb[0-9]*[a-z][bp][0-9]*$'); do
		owner=$(echo "$l" | sed 's/^kb\([0-9]*\).*/\1/')
		[ -d "/proc/$owner" ] || ip link del "$l" 2>/dev/null
	done
	return 0
}

case "${1:-}" in
probe) probe ;;
up) [ $# -eq 3 ] || die "usage: netns.sh up ID N"; up "$2" "$3" ;;
down) [ $# -eq 2 ] || die "usage: netns.sh down ID"; down "$2" ;;
sweep) sweep ;;
*) die "usage: netns.sh probe | up ID N | down ID | sweep" ;;
esac
