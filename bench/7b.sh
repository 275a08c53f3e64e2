#!/bin/sh
# 7b.sh: the 7B round of issue 23 (Llama-2-7B's shape, random weights) on a
# quiet machine. It builds sluice, writes the three files into DIR (kept for
# later runs: about 15 GB), then prints, as Markdown on stdout:
#
#   1. decode and prefill against llama.cpp (bench/run.mjs, alternating runs,
#      the default build and the ISAS caps) with weights in RAM and then in
#      mmap, at 1 and 2 threads, and decode as a fraction of the same run's
#      streaming-read bandwidth (bench/_streamread);
#   2. sluice's peak RSS against the file plus the KV cache those tokens fill.
#
# Usage (from anywhere; needs Go, Node ≥ 20 and `npm install` done in bench/):
#
#   bench/7b.sh DIR [RUNS]       RUNS alternating runs per cell (default 3)
#
# Environment: PROMPT (prompt tokens, default 128: 7B prefill at 1 thread is
# slow), GEN (generated tokens, default 32), THREADS (default 1,2), TIERS
# (default "ram mmap"), ISAS (kernel sets: default "native avx2 avx512",
# the others as SLUICE_ISA caps), RSS (0 skips part 2). The whole round takes
# about an hour on 2 cores.
set -eu

[ $# -ge 1 ] || { echo "usage: $0 DIR [RUNS]" >&2; exit 2; }
dir=$(mkdir -p "$1" && cd "$1" && pwd)
runs=${2:-3}
prompt=${PROMPT:-128}
gen=${GEN:-32}
threads=${THREADS:-1,2}
tiers=${TIERS:-ram mmap}
isas=${ISAS:-native avx2 avx512}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

[ -d bench/node_modules ] || { echo "$0: run npm install in bench/ first" >&2; exit 2; }
go build -o bench/bin/sluice ./cmd/sluice
bins=
for isa in $isas; do
	if [ $isa = native ]; then
		bins="$bins --sluice bin/sluice"
		continue
	fi
	printf '#!/bin/sh\nSLUICE_ISA=%s exec "$(dirname "$0")/sluice" "$@"\n' $isa > bench/bin/sluice-$isa
	chmod +x bench/bin/sluice-$isa
	bins="$bins --sluice bin/sluice-$isa"
done
s=bench/bin/sluice

# The files. Q4_K_M is llama.cpp's mix (llama-quantize's per-tensor types)
# re-encoded from the Q8_0 file, as `sluice quantize` writes it.
for d in q4_0 q8_0; do
	[ -f "$dir/7b-$d.gguf" ] || $s gen-model --preset 7b --dtype $d -o "$dir/7b-$d.gguf" >&2
done
[ -f "$dir/7b-q4_k_m.gguf" ] || $s quantize -m "$dir/7b-q8_0.gguf" --type q4_k_m -o "$dir/7b-q4_k_m.gguf" >&2
models="$dir/7b-q4_0.gguf $dir/7b-q4_k_m.gguf $dir/7b-q8_0.gguf"
bw=$(echo $models | tr ' ' ,)

echo "## 7B round: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
echo "CPU flags: $(grep -o 'avx512[a-z]*\|avx2\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# 1. Against llama.cpp and the read bandwidth, tier by tier.
for tier in $tiers; do
	echo "### --tier $tier"
	echo
	(cd bench && node run.mjs $bins --threads "$threads" --runs "$runs" \
		--prompt-tokens "$prompt" --gen-tokens "$gen" --sluice-args="--tier $tier" --bandwidth "$bw" \
		--json-out "$dir/7b-$tier.json" $models)
	echo
done

[ "${RSS:-1}" = 0 ] && exit 0

# 2. Peak RSS (sluice bench's peak_rss_bytes, one run at 2 threads) against
# the file and the KV cache: f32 K and V for every layer, the prompt and the
# generated tokens in pages of 16 tokens (llama 7B: 32 layers × 4096 dims).
echo "### peak RSS against file + KV ($prompt + $gen tokens, 2 threads)"
echo
echo "| file | tier | kernels | file MB | KV MB | peak RSS MB | RSS ÷ (file + KV) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
pages=$(( (prompt + gen + 15) / 16 ))
kv=$(( 2 * 32 * 4096 * 4 * 16 * pages ))
for m in $models; do
	for tier in $tiers; do
		for isa in $isas; do
			if [ $isa = native ]; then env=; else env=SLUICE_ISA=$isa; fi
			j=$(env $env $s bench -m "$m" --tier $tier --threads 2 --prompt-tokens "$prompt" --gen-tokens "$gen" --runs 1 --json 2>/dev/null | tail -1)
			node -e '
				const [j, file, kv, name, tier] = process.argv.slice(1);
				const r = JSON.parse(j), f = Number(file), k = Number(kv), mb = (x) => (x / 1e6).toFixed(0);
				console.log(`| ${name} | ${tier} | ${r.kernels} | ${mb(f)} | ${mb(k)} | ${mb(r.peak_rss_bytes)} | ${(r.peak_rss_bytes / (f + k)).toFixed(3)} |`);
			' "$j" "$(stat -c %s "$m")" "$kv" "$(basename "$m")" "$tier"
		done
	done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
