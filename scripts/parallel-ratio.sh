#!/usr/bin/env bash
# The 32-sequence ratio (issue 23 item 4): decode tok/s of `--parallel 32` over
# `--parallel 1` at one thread, per kernel cap and per binary, in alternating
# rounds, by wall time (bench's decode_tok_s) and by CPU time.
#
# Usage: scripts/parallel-ratio.sh MODEL ROUNDS BINARY...
#   e.g. scripts/parallel-ratio.sh 110m-q8_0.gguf 3 bin/sluice-base bin/sluice
# Environment: ISAS (default "avx512 avx2"), NS (default "1 32").
#
# Each cell runs `bench --threads 1 --parallel N --prompt-tokens 16
# --gen-tokens 64 --runs 1 --json` under SLUICE_ISA, and again with
# --gen-tokens 1 (load and prefill only); the process CPU time (user+sys)
# of the second is taken from the first's, so "cpu tok/s" is decoded tokens
# per CPU second of the decode steps. On a shared machine wall time counts
# other processes' time slices; CPU time does not, but a memory-bound step
# (one sequence) still runs slower per CPU second when others load the
# memory bus. Every run's text md5 is printed: with greedy decoding it must
# be the same for every binary, cap and N (batch invariance).
#
# Output: one line per run, then per (binary, cap) the medians over rounds of
# decode tok/s by wall and by CPU for each N, and the ratios N=32 ÷ N=1.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,8p "$0" >&2; exit 2; }
model=$1 rounds=$2
shift 2
isas=${ISAS:-avx512 avx2}
ns=${NS:-1 32}
gen=64
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cpu() { # prints user+sys seconds of the command's run
	local t
	t=$( { /usr/bin/time -f 'CPU %U %S' "$@" >/dev/null; } 2>&1 | grep '^CPU ' )
	echo "$t" | awk '{print $2+$3}'
}
for r in $(seq "$rounds"); do
	for isa in $isas; do
		for n in $ns; do
			for bin in "$@"; do
				out=$(SLUICE_ISA=$isa /usr/bin/time -f 'CPU %U %S' "$bin" bench -m "$model" --threads 1 --parallel "$n" \
					--prompt-tokens 16 --gen-tokens $gen --runs 1 --json 2>&1)
				c64=$(echo "$out" | awk '/^CPU /{print $2+$3}')
				tok=$(echo "$out" | grep -o '"decode_tok_s":[0-9.]*' | cut -d: -f2)
				md5=$(echo "$out" | grep -o '"text_md5":"[0-9a-f]*"' | cut -d'"' -f4)
				c1=$(cpu env SLUICE_ISA="$isa" "$bin" bench -m "$model" --threads 1 --parallel "$n" \
					--prompt-tokens 16 --gen-tokens 1 --runs 1 --json)
				cputok=$(awk -v n="$n" -v g=$gen -v a="$c64" -v b="$c1" 'BEGIN{d=a-b; if (d<=0) print "nan"; else printf "%.1f", n*(g-1)/d}')
				line="$r $bin $isa $n $tok $cputok $md5 $(cut -d' ' -f1 /proc/loadavg)"
				echo "round binary isa N wall_tok_s cpu_tok_s md5 load: $line" >&2
				echo "$line" >>"$log"
			done
		done
	done
done
echo "| binary | cap | N=1 wall / cpu tok/s | N=32 wall / cpu tok/s | ratio wall | ratio cpu | text md5s |"
echo "| --- | --- | ---: | ---: | ---: | ---: | --- |"
for bin in "$@"; do
	for isa in $isas; do
		awk -v b="$bin" -v i="$isa" '
			function med(a, k,   j, t, s) { # median of a[1..k]
				for (s = 1; s <= k; s++) for (j = s + 1; j <= k; j++) if (a[j] < a[s]) { t = a[s]; a[s] = a[j]; a[j] = t }
				return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
			}
			$2 == b && $3 == i && $4 == 1 { w1[++k1] = $5; c1[k1] = $6; m[$7] = 1 }
			$2 == b && $3 == i && $4 == 32 { w32[++k32] = $5; c32[k32] = $6; m[$7] = 1 }
			END {
				if (!k1 || !k32) exit
				a = med(w1, k1); c = med(c1, k1); d = med(w32, k32); e = med(c32, k32)
				s = ""; for (x in m) s = s (s == "" ? "" : " ") substr(x, 1, 8)
				printf "| %s | %s | %.1f / %.1f | %.1f / %.1f | %.2f | %.2f | %s |\n", b, i, a, c, d, e, d / a, e / c, s
			}' "$log"
	done
done
