#!/bin/sh
# kquant-prefill.sh: the K-quant prefill round of issue 23 (must show 1):
# prefill by CPU time (cpuprefill.sh) of sluice binaries against llama.cpp
# on the Q4_K_M, Q5_K_M and Q6_K files of the 110m and 1b shapes, at 1 and 2
# threads, with the default kernels and held to AVX2 (sluice by SLUICE_ISA,
# llama.cpp by a private copy of node_modules without its AVX-512 and
# AVX-VNNI CPU libraries, so that ggml loads libggml-cpu-haswell.so; see
# README.md), then decode at 1 thread through run.mjs.
#
# Usage (from bench/, after npm install):
#   sh kquant-prefill.sh NEW BASE DIR
# NEW and BASE are sluice binaries (BASE may be "-" to leave it out); DIR
# holds 110m-{q4_k_m,q5_k_m,q6_k}.gguf and 1b-{q4_k_m,q5_k_m,q6_k}.gguf
# (sluice gen-model --preset 110m|1b --dtype f16, then sluice quantize
# --type q4_k_m|q5_k_m|q6_k: README.md). RUNS (3)
# and RUNS1B (2) set the runs per cell. Prints Markdown.
set -eu
[ $# -eq 3 ] || { echo "usage: sh kquant-prefill.sh NEW BASE DIR" >&2; exit 2; }
here=$(pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
new=$(abs "$1")
base=""
[ "$2" = - ] || base=$(abs "$2")
dir=$(abs "$3")
runs=${RUNS:-3}
runs1b=${RUNS1B:-2}
small="$dir/110m-q4_k_m.gguf $dir/110m-q5_k_m.gguf $dir/110m-q6_k.gguf"
big="$dir/1b-q4_k_m.gguf $dir/1b-q5_k_m.gguf $dir/1b-q6_k.gguf"
for m in $small $big; do [ -f "$m" ] || { echo "kquant-prefill.sh: $m: no such file" >&2; exit 2; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Wrappers that cap a binary at AVX2.
printf '#!/bin/sh\nSLUICE_ISA=avx2 exec "%s" "$@"\n' "$new" >"$tmp/new-avx2"
chmod +x "$tmp/new-avx2"
# llama.cpp held to AVX2: the scripts and a copy of node_modules without the
# AVX-512 / AVX-VNNI variants.
mkdir "$tmp/avx2"
cp ./*.mjs cpuprefill.sh package.json "$tmp/avx2/"
cp -a "$(readlink -f node_modules)" "$tmp/avx2/node_modules"
libs="$tmp/avx2/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
for v in skylakex cannonlake cascadelake cooperlake icelake sapphirerapids zen4 alderlake; do
	rm -f "$libs/libggml-cpu-$v.so"
done
echo "# K-quant prefill, $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -o 'avx512[a-z]*\|avx2\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for t in 1 2; do
	echo
	echo "## default kernels, $t thread(s); $(uptime)"
	sh cpuprefill.sh -t "$t" -r "$runs" "$new" ${base:+"$base"} llama.cpp -- $small
	sh cpuprefill.sh -t "$t" -r "$runs1b" "$new" ${base:+"$base"} llama.cpp -- $big
done
for t in 1 2; do
	echo
	echo "## SLUICE_ISA=avx2 against llama.cpp's haswell library, $t thread(s); $(uptime)"
	(cd "$tmp/avx2" && sh cpuprefill.sh -t "$t" -r "$runs" "$tmp/new-avx2" llama.cpp -- $small &&
		sh cpuprefill.sh -t "$t" -r "$runs1b" "$tmp/new-avx2" llama.cpp -- $big)
done
echo
echo "## decode, 1 thread (run.mjs: 16 prompt tokens, 128 generated, medians); $(uptime)"
node run.mjs --sluice "$new" --threads 1 --runs "$runs" --prompt-tokens 16 --gen-tokens 128 $small $big
echo
echo "(done; $(uptime))"
