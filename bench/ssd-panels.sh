#!/bin/sh
# ssd-panels.sh: the cost of an N-row pass over streamed weights (issue 23,
# item 2), the ssd tier at 25% of the file against the ram tier, and plain
# decode at ssd 25%, for two sluice binaries alternated (before and after a
# change), under the default kernels and SLUICE_ISA=avx512 (VNNI without
# AMX, where row-major batches ran on the row kernel).
#
#   bench/ssd-panels.sh BEFORE AFTER [MODEL] [ROUNDS]
#
# MODEL defaults to bench/models/1b22-q8_0.gguf, made when missing: the 1b preset
# with 22 layers, TinyLlama's shape (1,194,243,104 bytes). The ssd tier reads
# with O_DIRECT (no page cache); as root the page cache is dropped before
# each run anyway. A pass of N rows is `--prompt-tokens N --gen-tokens 1`
# (bench sets the prefill chunk to the prompt, so one pass): its time is
# N ÷ prefill tok/s. Each line has the user and system CPU seconds of the
# process and the load average: on a shared machine compare those.
set -eu
before=$(realpath "$1") after=$(realpath "$2") rounds=${4:-3}
model=$(realpath -m "${3:-$(dirname "$0")/models/1b22-q8_0.gguf}")
if [ ! -f "$model" ]; then
	mkdir -p "$(dirname "$model")"
	"$after" gen-model --preset 1b --dtype q8_0 --layers 22 -o "$model"
fi
size=$(stat -c %s "$model")
budget=$((size / 4))
drop() { [ "$(id -u)" = 0 ] && sync && echo 3 >/proc/sys/vm/drop_caches || true; }
run() { # label isa args...
	label=$1 isa=$2
	shift 2
	drop
	t=$(mktemp)
	out=$(SLUICE_ISA=$isa /usr/bin/time -f '%U %S' "$@" --json 2>"$t")
	echo "$label isa=${isa:-default} $(echo "$out" | grep -o '"kernels":"[^"]*"\|"prefill":{[^}]*}\|"decode":{[^}]*}\|"text_md5":"[^"]*"\|"disk_bound_tok_s":[0-9.e+]*\|"packed_tensors":[0-9]*\|"pack_seconds":[0-9.e+-]*' | tr '\n' ' ') cpu=$(tail -1 "$t") load=$(cut -d' ' -f1 /proc/loadavg)"
	rm -f "$t"
}
for r in $(seq "$rounds"); do
	for isa in "" avx512; do
		for bin in "$before" "$after"; do
			for n in 1 16 64 128; do
				run "round=$r $bin ssd rows=$n" "$isa" "$bin" bench -m "$model" --tier ssd --mem-budget "$budget" --threads 2 --prompt-tokens $n --gen-tokens 1 --runs 3
				run "round=$r $bin ram rows=$n" "$isa" "$bin" bench -m "$model" --tier ram --threads 2 --prompt-tokens $n --gen-tokens 1 --runs 3
			done
			run "round=$r $bin ssd decode" "$isa" "$bin" bench -m "$model" --tier ssd --mem-budget "$budget" --threads 2 --prompt-tokens 8 --gen-tokens 16 --runs 2 --disk-bandwidth
		done
	done
done
