#!/bin/sh
# cpuprefill.sh: prefill speed by CPU time, which time-slicing by other
# processes does not inflate (bench/RESULTS.md, "K-quant batches on AMX
# tiles"). Each engine runs as one process with --gen-tokens 1 and prompts of
# 8 and 512 tokens, RUNS times each (alternating engines); the minimum
# user+system CPU seconds of each prompt length, and 504 tokens ÷ their
# difference: what the 504 extra prompt tokens cost (loading, start-up and
# the one decode step cancel).
#
# Usage (from bench/): sh cpuprefill.sh [-t THREADS] [-r RUNS] ENGINE... -- MODEL...
# ENGINE is a sluice binary (bin/sluice, bin/sluice-avx2, ...) or "llama.cpp"
# (llamacpp.mjs through node). Prints one Markdown row per model and engine.
# Run i starts at engine i (mod the count): on a loaded host the process that
# follows a llama.cpp run paid more system time loading, whatever it was.
set -eu
threads=1
runs=3
while [ $# -gt 0 ]; do
	case $1 in
	-t) threads=$2; shift 2 ;;
	-r) runs=$2; shift 2 ;;
	*) break ;;
	esac
done
engines=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do engines="$engines $1"; shift; done
[ $# -gt 0 ] && shift
[ -n "$engines" ] && [ $# -gt 0 ] || { echo "usage: sh cpuprefill.sh [-t N] [-r N] ENGINE... -- MODEL..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu() { # engine model prompt-tokens: prints user+sys seconds of one run
	if [ "$1" = llama.cpp ]; then
		/usr/bin/time -f '%U %S' -o "$tmp/t" node llamacpp.mjs -m "$2" --threads "$threads" \
			--prompt-tokens "$3" --gen-tokens 1 --runs 1 >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	else
		/usr/bin/time -f '%U %S' -o "$tmp/t" "$1" bench -m "$2" --threads "$threads" \
			--prompt-tokens "$3" --gen-tokens 1 --runs 1 >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	fi
	awk '{printf "%.3f\n", $1+$2}' "$tmp/t"
}
echo "| model | engine | threads | min CPU s, 8 tokens | min CPU s, 512 tokens | prefill tok/s (CPU) |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for m in "$@"; do
	for i in $(seq "$runs"); do
		set -- $engines
		n=$#
		j=0
		while [ $j -lt $(((i - 1) % n)) ]; do set -- "$@" "$1"; shift; j=$((j + 1)); done
		for e in "$@"; do
			k=$(echo "$e" | tr '/.' '__')
			cpu "$e" "$m" 8 >>"$tmp/$k.8"
			cpu "$e" "$m" 512 >>"$tmp/$k.512"
		done
	done
	for e in $engines; do
		k=$(echo "$e" | tr '/.' '__')
		a=$(sort -n "$tmp/$k.8" | head -1)
		b=$(sort -n "$tmp/$k.512" | head -1)
		echo "| $(basename "$m" .gguf) | $e | $threads | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.0f", 504/(b-a)}') |"
		rm -f "$tmp/$k.8" "$tmp/$k.512"
	done
done
