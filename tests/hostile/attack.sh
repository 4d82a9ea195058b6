#!/bin/bash
# attack.sh — a hostile-input attack on the release binary, outside `make
# test` (it takes a few minutes and wants root for pids cgroups and other
# users). Every case runs bounded (timeout, and its own pids cgroup with
# pids.max 512 when /sys/fs/cgroup is writable), then is checked for what
# must never happen:
#   crash      the launcher died of a signal it did not ask for (SEGV, ABRT...)
#   hang       the case outlived its timeout
#   lines      more than one stderr line for a failure
#   raw        a control byte (other than newline) on stderr
#   leftover   a process of the case alive after it, a /tmp/kb-* folder of its
#              pid, a staging folder in its output folder
#   wrong      exit 0 where the case must fail, or a file outside DIR changed
# Usage: tests/hostile/attack.sh [BIN]   (default build/bin/kernbench)
# Prints one line per case and a summary; exit 1 if any case failed.
set -u
BIN=${1:-$(pwd)/build/bin/kernbench}
TBIN=${TBIN:-$(dirname "$BIN")/kernbench-test}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/kb-attack-XXXXXX)
CG=""
pass=0 fail=0 n=0
trap 'rm -rf "$W"; [ -n "$CG" ] && rmdir "$CG" 2>/dev/null' EXIT

if [ -w /sys/fs/cgroup/pids/cgroup.procs ]; then CGBASE=/sys/fs/cgroup/pids
elif [ -w /sys/fs/cgroup/cgroup.procs ]; then CGBASE=/sys/fs/cgroup
else CGBASE=""; fi

# case NAME EXPECT TIMEOUT CMD...   EXPECT: fail (non-zero, one line), ok (0), any,
# stopped (the case's timeout ends it on purpose: SIGTERM, one line)
case_() {
	local name=$1 expect=$2 secs=$3; shift 3
	local out=$W/out.$n err=$W/err.$n rc
	n=$((n + 1))
	ls -d /tmp/kb-*-[0-9]*-?????? 2>/dev/null | sort > "$W/before"
	if [ -n "$CGBASE" ]; then
		CG=$CGBASE/kb-attack-$$-$n
		mkdir "$CG" && echo 512 > "$CG/pids.max"
		( echo $BASHPID > "$CG/cgroup.procs"; exec timeout -s TERM -k 5 "$secs" "$@" ) \
			>"$out" 2>"$err"
		rc=$?
	else
		timeout -s TERM -k 5 "$secs" "$@" >"$out" 2>"$err"
		rc=$?
	fi
	local why=""
	sleep 0.3
	if [ -n "$CGBASE" ]; then
		if [ -s "$CG/cgroup.procs" ]; then
			why="$why leftover(procs:$(tr '\n' ' ' < "$CG/cgroup.procs"))"
			for p in $(cat "$CG/cgroup.procs"); do kill -9 "$p" 2>/dev/null; done
			sleep 0.2
		fi
		rmdir "$CG" 2>/dev/null; CG=""
	fi
	[ "$expect" != stopped ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && why="$why hang"
	[ "$expect" = stopped ] && [ $rc -eq 137 ] && why="$why hang(SIGTERM ignored)"
	# died of a signal it did not report (a stop signal says "interrupted")
	case $rc in 134|135|136|139|132|131) grep -q "interrupted by" "$err" ||
		why="$why crash($rc)";; esac
	local lines=$(grep -cv '^kernbench: warning' "$err")
	[ "$expect" = fail ] && [ $rc -eq 0 ] && why="$why wrong(exit0)"
	[ "$expect" = ok ] && [ $rc -ne 0 ] && why="$why wrong(exit$rc)"
	[ "$expect" != ok ] && [ $rc -ne 0 ] && [ "$lines" -gt 1 ] && why="$why lines($lines)"
	[ "${RAW_OK:-}" != "$name" ] && LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$err" &&
		why="$why raw"
	# folders of a dead process that were not there before the case (other
	# users of the machine leave theirs)
	ls -d /tmp/kb-*-[0-9]*-?????? 2>/dev/null | sort | comm -13 "$W/before" - | while read d; do
		pid=$(basename "$d" | sed 's/^kb-\(agent-\)\?\([0-9]*\)-.*/\2/')
		kill -0 "$pid" 2>/dev/null || echo "$d"
	done > "$W/dirs"
	[ -s "$W/dirs" ] && { why="$why leftover(tmp)"; xargs rm -rf < "$W/dirs"; }
	find "$W" -name .kernbench-staging 2>/dev/null | grep -q . && why="$why leftover(staging)"
	find "$W" -name .kernbench-staging -exec rm -rf {} + 2>/dev/null
	if [ -n "$why" ]; then
		fail=$((fail + 1)); printf 'FAIL %-46s exit %3d:%s | %s\n' "$name" $rc "$why" \
			"$(head -c 160 "$err" | tr '\n' ' ')"
	else
		pass=$((pass + 1)); printf 'ok   %-46s exit %3d  %s\n' "$name" $rc \
			"$(head -c 100 "$err" | tr '\n' ' ')"
	fi
}

D=$W/d
R="$BIN run"
mkdir -p "$D"
echo victim > "$W/victim.txt"

# ---- command line
for a in "--ranks $'1\n'" "--ranks 0" "--ranks 65" "--ranks 18446744073709551617" \
	 "--pes 01" "--seed -1" "--seed 18446744073709551616" "--arg =" "--arg x" \
	 "--arg $(printf 'a%.0s' {1..300})=1" "--set nosuch=1" "--set dma.setup_cycles=1e3" \
	 "--set run.bind_host=localhost" "--set run.bind_host=::1" "--set run.bind_host=$'\e[31m'" \
	 "--trace-window nan:1" "--trace-window 5:1" "--trace-ranks 99" "--trace-f on" \
	 "--transport udp" "--colocate $'\x1b'" "--mode fast" "--out ''" "--inputs /nonexistent" \
	 "--agent-timeout 5" "--hosts /dev/zero" "--keys /dev/null" "--config /dev/zero" \
	 "--config /nonexistent.yaml" "-x" "--quiet=1" "--out"; do
	eval "case_ 'run gemm $a' fail 30 $R gemm --out $D/cli $a"
done
case_ "unknown command" fail 10 "$BIN" $'r\x1bun'
case_ "list --foo" fail 10 "$BIN" list --foo
case_ "keygen no --out" fail 10 "$BIN" keygen
case_ "keygen over a file" fail 10 "$BIN" keygen --out "$W/victim.txt"
case_ "agent no coordinator" fail 10 "$BIN" agent
case_ "agent ipv6" fail 10 "$BIN" agent --coordinator 'tcp://[::1]:5555'
case_ "plot a missing folder" fail 20 "$BIN" plot "$W/none"
case_ "run -h after junk" ok 10 "$BIN" run --bogus x -h
case_ "gemm --arg m=4294967360" fail 30 $R gemm --out "$D/m" --arg m=4294967360
case_ "dma_probe rows 2^32+64" fail 30 $R "$(dirname "$BIN")/../plugins/dma_probe.so:dma_probe" \
	--out "$D/dp" --arg rows=4294967360
case_ "ring pass=x (usage)" fail 60 $R ring_attention --ranks 2 --out "$D/p" --arg pass=x
case_ "paged lens=1,,2" fail 60 $R gqa_decode_paged --out "$D/l" --arg lens=1,,2
case_ "gemm.model unknown" fail 30 $R gemm --out "$D/gm" --set gemm.model=nosuch
case_ "gemm.params on built-in" fail 30 $R gemm --out "$D/gp" --set gemm.params=a=1
case_ "gemm.model on traffic" fail 30 $R traffic --out "$D/tm" --set gemm.model=roofline
case_ "inproc with a kernel object" fail 30 $R "$(dirname "$BIN")/../plugins/tl_example.so:softmax" \
	--transport inproc --out "$D/io"

# ---- files
python3 -c "print('['*200000+']'*200000)" > "$W/deep.yaml"
printf 'a: &x [*x]\n' > "$W/alias.yaml"
printf '\t- x\n' > "$W/tab.yaml"
head -c 2000000 /dev/urandom > "$W/random.yaml"
mkfifo "$W/fifo.yaml"
ln -sf "$W/loop.yaml" "$W/loop.yaml"
for f in deep alias tab random fifo loop; do
	case_ "config $f" fail 20 "$BIN" config --config "$W/$f.yaml"
	case_ "hosts $f" fail 20 $R gemm --out "$D/h" --hosts "$W/$f.yaml"
done
printf 'coordinator: tcp://localhost:5555\nhosts:\n  - ranks: [0]\n' > "$W/h-name.yaml"
case_ "hosts coordinator by name" fail 20 $R gemm --out "$D/hn" --hosts "$W/h-name.yaml"
"$BIN" keygen --out "$W/k" >/dev/null 2>&1
chmod 644 "$W/k"
case_ "keys readable by others" fail 20 $R gemm --out "$D/k" --keys "$W/k"
ln -sf "$W/k" "$W/klink"
case_ "keys through a link" fail 20 $R gemm --out "$D/k" --keys "$W/klink"

# ---- the output folder
echo x > "$W/afile"
case_ "--out is a file" fail 20 $R gemm --out "$W/afile"
mkdir -p "$D/links" && ln -sf "$W/victim.txt" "$D/links/summary.json" && \
	ln -sf "$W/victim.txt" "$D/links/op_log.jsonl"
case_ "results are links to a victim" ok 60 $R gemm --quiet --out "$D/links"
grep -qx victim "$W/victim.txt" || echo "FAIL results-through-links: the victim changed"
mkdir -p "$D/man" && printf '../victim.txt\n/etc/passwd\n' > "$D/man/.kernbench-results"
case_ "a manifest naming outside files" ok 60 $R gemm --quiet --out "$D/man"
grep -qx victim "$W/victim.txt" || echo "FAIL manifest: the victim changed"
mkdir -p "$D/stl" && ln -sf "$W" "$D/stl/.kernbench-staging"
case_ "staging planted as a link" ok 60 $R gemm --quiet --out "$D/stl"
mkdir -p "$D/lk" && mkfifo "$D/lk/.kernbench.lock"
case_ "lock planted as a FIFO" fail 20 $R gemm --quiet --out "$D/lk"
mkdir -p /tmp/kb-agent-999999-Zz9Yy8 && ln -sf "$W" /tmp/kb-agent-999999-Zz9Yy8/.parts
case_ "agent sweep of a planted link" stopped 5 "$BIN" agent --coordinator tcp://127.0.0.1:9 --index 0
[ -e "$W/victim.txt" ] || echo "FAIL agent sweep removed the victim"
rm -rf /tmp/kb-agent-999999-Zz9Yy8

# ---- kernel objects
build() { # NAME BODY [CTOR]
	cat > "$W/$1.c" <<EOF
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tl.h"
#include "tl_io.h"
__attribute__((constructor)) static void ctor(void) { ${3:-} }
int k(struct tl *tl, const struct tl_args *args);
int k(struct tl *tl, const struct tl_args *args) { (void)args; $2 return 0; }
EOF
	cc -std=gnu17 -fPIC -shared -I"$ROOT/kernel_host/include" -o "$W/$1.so" "$W/$1.c"
}
build ctor_exit "" "exit(0);"
build ctor_abort "" "abort();"
build ctor_segv "" "raise(SIGSEGV);"
build ctor_loop "" "for (;;) pause();"
build ctor_fork "" "for (int i = 0; i < 2000; i++) if (fork() == 0) { pause(); }"
build k_exit0 "if (!tl_program_id(tl)) _exit(0);"
build k_abort "if (!tl_program_id(tl)) abort();"
build k_deep "volatile char b[1 << 26]; b[0] = 1; (void)b;"
build k_flood "for (int i = 0; i < 100000; i++) fprintf(stderr, \"\\x1b[2J flood %d\\n\", i);"
build k_name "tl_save_npy(tl, tl_arg_str(args, \"name\", \"o.npy\"), 0, 2, 2, TL_F32);"
build k_file "char p[512]; tl_output_file(tl, tl_arg_str(args, \"name\", \"x\"), p, sizeof(p));"
build k_fail "tl_fail(tl, \"\\x1b[31mred\\nsecond line\");"
build k_ret "return 7;"
build k_alloc "void *p = malloc((size_t)1 << 46); (void)p;"
for o in ctor_exit ctor_abort ctor_segv k_exit0 k_abort k_deep k_fail k_ret; do
	case_ "object $o" fail 60 $R "$W/$o.so:k" --pes 2 --quiet --out "$D/o-$o"
done
# these run to the end: what they fork is killed with the run (the pids
# cgroup bounds the fork loop), an allocation that fails is theirs to see,
# and what a kernel prints itself is its own (not kernbench's lines)
RAW_OK="object k_flood"
for o in ctor_fork k_alloc k_flood; do
	case_ "object $o" ok 60 $R "$W/$o.so:k" --pes 2 --quiet --out "$D/o-$o"
done
case_ "object ctor_loop (watchdog)" fail 60 $R "$W/ctor_loop.so:k" --pes 2 --quiet \
	--out "$D/o-loop" --set run.watchdog_ms=2000
for name in ../victim.txt "$W/victim.txt" $'a\nb' .kernbench.lock summary.json .. "a/b"; do
	case_ "tensor name '$name'" fail 60 $R "$W/k_name.so:k" --pes 1 --mode data --quiet \
		--out "$D/tn" --arg "name=$name"
	case_ "output file '$name'" fail 60 $R "$W/k_file.so:k" --pes 1 --quiet \
		--out "$D/tf" --arg "name=$name"
done
grep -qx victim "$W/victim.txt" || echo "FAIL tensor names: the victim changed"

# ---- signals and limits
for s in INT TERM HUP QUIT USR1 USR2 PIPE XFSZ; do
	case_ "SIG$s mid-run" fail 30 bash -c "$R traffic --quiet --out $D/s-$s --arg components=4 \
		--arg messages=400000000 & p=\$!; sleep 1.5; kill -$s \$p; wait \$p"
done
mkdir -p "$W/nobody" && chmod 1777 "$W/nobody" && chmod 755 "$W"
for l in "-n 40" "-s 200" "-v 300000" "-f 50" "-u 30"; do
	case_ "ulimit $l (as nobody)" fail 30 setpriv --reuid=65534 --regid=65534 --clear-groups \
		bash -c "ulimit $l; exec $BIN run gemm --mode data --quiet --out $W/nobody/ul-$RANDOM"
done
case_ "stdout > /dev/full" fail 30 bash -c "$R gemm --out $D/full > /dev/full"

# ---- strangers
case_ "garbage into a run's ipc socket" ok 60 bash -c "$R traffic --quiet --out $D/st \
	--arg components=4 --arg messages=4000000 & p=\$!; sleep 1; \
	for s in /tmp/kb-\$p-*/coord; do timeout 5 python3 -c 'import socket, sys; \
	c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); \
	c.sendall(open(\"/dev/urandom\", \"rb\").read(100000))' \$s 2>/dev/null; done; \
	kill -INT \$p; wait \$p; [ \$? = 130 ]"
if [ "$(id -u)" = 0 ] && [ -f "$TBIN" ]; then
	printf 'coordinator: tcp://127.0.0.1:23876\nhosts:\n  - ranks: [0]\n' > "$W/h1.yaml"
	chmod 755 "$W"
	case_ "nobody agent joins a root run" ok 90 bash -c "$R gemm --quiet --out $D/h1 \
		--hosts $W/h1.yaml & c=\$!; sleep 1; setpriv --reuid=65534 --regid=65534 \
		--clear-groups $BIN agent --coordinator tcp://127.0.0.1:23876 --index 0 \
		2>/dev/null && exit 9; $BIN agent --coordinator tcp://127.0.0.1:23876 --index 0; \
		wait \$c"
fi

# ---- plot
mkdir -p "$D/pl" && ln -sf /dev/zero "$D/pl/op_log.jsonl"
case_ "plot an op log linked to /dev/zero" fail 30 "$BIN" plot "$D/pl"
mkdir -p "$D/pl2" && printf '{"start_ps": 1e400, "end_ps": 1e400, "rank": 0, "pe": 0, "engine": "x", "op_kind": "y"}\n' > "$D/pl2/op_log.jsonl"
case_ "plot a record at 1e400 ps" fail 30 "$BIN" plot "$D/pl2"
case_ "plot --window nan:nan" fail 30 "$BIN" plot "$D/pl2" --window nan:nan

echo "attack: $pass passed, $fail failed, $n cases"
[ $fail -eq 0 ]
