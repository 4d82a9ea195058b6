#!/bin/sh
# regenerate.sh — rewrites every golden file after an intended model change
# (`make golden`); review the diff and commit it with the change.
#
#   attention_latency.txt   pinned latencies of the attention kernels at
#                           small fixed configs (tests/integration/test_attention.c)
#   sched_*.txt             scheduler stage sequences (unit tests, rewritten
#                           by running them with KB_GOLDEN_UPDATE=1)
#
# Needs KB_BIN (the kernbench binary; its build directory is used for the
# unit tests). Run from anywhere; paths are relative to the repository.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${KB_BIN:?KB_BIN must name the kernbench binary}
build=$(dirname "$(dirname "$bin")")
case "$build" in "$root"/*) build=${build#"$root"/} ;; esac
out=$(mktemp -d /tmp/kb-golden-XXXXXX)
trap 'rm -rf "$out"' EXIT

# NAME then the `run` arguments (timing mode; colocation never changes a
# result, `all` is only faster)
configs='
decode_opt2 gqa_decode_opt2 --pes 2 --colocate all --arg heads_q=8 --arg heads_kv=2 --arg head_dim=64 --arg tile=64 --arg seq_kv=1024
decode_opt3 gqa_decode_opt3 --pes 2 --colocate all --arg heads_q=8 --arg heads_kv=2 --arg head_dim=64 --arg tile=64 --arg seq_kv=1024
prefill gqa_prefill --pes 2 --colocate all --arg heads_q=4 --arg heads_kv=2 --arg head_dim=64 --arg tile=64 --arg seq_q=128 --arg seq_kv=128
ring_kv ring_attention --ranks 2 --pes 1 --colocate all --arg heads_q=4 --arg heads_kv=1 --arg head_dim=64 --arg tile=64 --arg seq_q=128 --arg seq_kv=64 --arg pass=kv
ring_q ring_attention --ranks 2 --pes 1 --colocate all --arg heads_q=4 --arg heads_kv=1 --arg head_dim=64 --arg tile=64 --arg seq_kv=256 --arg pass=q
'

file="$root/tests/golden/attention_latency.txt"
{
	echo "# NAME LATENCY_PS RUN-ARGS — written by tests/golden/regenerate.sh (make golden)"
	echo "$configs" | while read -r name args; do
		[ -n "$name" ] || continue
		# shellcheck disable=SC2086
		"$bin" run $args --out "$out/$name" --quiet
		lat=$(sed -n 's/^  "latency_ps": \([0-9]*\),$/\1/p' "$out/$name/summary.json")
		# a run without a latency must not become a golden line
		case "$lat" in
		''|*[!0-9]*) echo "regenerate.sh: $name: no latency_ps in $out/$name/summary.json" >&2
			exit 1 ;;
		esac
		echo "$name $lat run $args"
	done
} > "$file.tmp"
mv "$file.tmp" "$file"
echo "wrote $file"

# scheduler goldens: the unit tests rewrite them themselves (update mode
# only writes), then a plain run checks a fresh plan against what was
# written — a second, independent computation, not the same buffer
make -C "$root" --no-print-directory BUILD="$build" "$build/tests/unit_tests" >/dev/null
KB_GOLDEN_UPDATE=1 KB_ROOT="$root" "$build/tests/unit_tests" --filter 'sched_golden/*'
KB_ROOT="$root" "$build/tests/unit_tests" --filter 'sched_golden/*'
