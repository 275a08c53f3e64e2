#!/bin/sh
# round.sh: the quiet-machine round of issue 23 and issue 21's constrained
# decoding, every figure of the top section of bench/RESULTS.md, for a new
# binary against a base one (the no-regression check: the same scripts, the
# same method). Run it on a quiet machine; it takes about 50 minutes on 2
# cores and prints Markdown on stdout (the raw lines of each script go to
# DIR/round-*.log).
#
#   bench/round.sh BASE NEW DIR
#
# BASE and NEW are sluice binaries (NEW usually bin/sluice built from the
# tree); DIR holds the model files, made when missing:
#   110m-{q8_0,q4_k_m,q5_k_m,q6_k}.gguf, 1b-{q4_k_m,q5_k_m,q6_k}.gguf (from
#   1b-f16.gguf), 1b22-q8_0.gguf (TinyLlama's shape), spec/ (the widened
#   stories260K target and its draft: specexec-ssd.sh), 7b-{q4_0,q8_0,
#   q4_k_m}.gguf (about 15 GB).
# Environment: PARTS (default "constrained parallel prefill ssd specexec 7b")
# runs a subset; RUNS and RUNS1B (default 5 and 2) are kquant-prefill.sh's.
set -eu
[ $# -eq 3 ] || { sed -n 2,18p "$0" >&2; exit 2; }
base=$(realpath "$1") new=$(realpath "$2") dir=$(mkdir -p "$3" && cd "$3" && pwd)
parts=${PARTS:-constrained parallel prefill ssd specexec 7b}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
[ -d node_modules ] || { echo "$0: run npm install in bench/ first" >&2; exit 2; }
ln -sf "$base" bin/sluice-base-round
ln -sf "$new" bin/sluice-new-round
printf '#!/bin/sh\nSLUICE_ISA=avx2 exec "%s" "$@"\n' "$new" >bin/sluice-new-round-avx2
printf '#!/bin/sh\nSLUICE_ISA=avx2 exec "%s" "$@"\n' "$base" >bin/sluice-base-round-avx2
chmod +x bin/sluice-new-round-avx2 bin/sluice-base-round-avx2

mk() { # file: make it with NEW when missing
	f=$dir/$1
	[ -s "$f" ] && return 0
	case $1 in
	110m-q8_0.gguf) "$new" gen-model --preset 110m --dtype q8_0 -o "$f" ;;
	110m-f16.gguf | 1b-f16.gguf) "$new" gen-model --preset "${1%%-*}" --dtype f16 -o "$f" ;;
	110m-q[456]_k*.gguf | 1b-q[456]_k*.gguf)
		src=${1%%-*}-f16.gguf
		mk "$src"
		t=${1#*-}
		"$new" quantize -m "$dir/$src" -o "$f" --type "${t%.gguf}"
		;;
	1b22-q8_0.gguf) "$new" gen-model --preset 1b --dtype q8_0 --layers 22 -o "$f" ;;
	7b-q4_0.gguf | 7b-q8_0.gguf)
		t=${1#7b-}
		"$new" gen-model --preset 7b --dtype "${t%.gguf}" -o "$f"
		;;
	7b-q4_k_m.gguf)
		mk 7b-q8_0.gguf
		"$new" quantize -m "$dir/7b-q8_0.gguf" -o "$f" --type q4_k_m
		;;
	esac >&2
}
say() { echo "$*"; echo; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

say "## Round: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
say "CPU flags: $(grep -o 'avx512[a-z]*\|avx2\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '); base $(basename "$base"), new $(basename "$new")"

for part in $parts; do
	case $part in
	constrained)
		mk 110m-q8_0.gguf
		say "### Constrained decoding (load $(load))"
		node run.mjs --sluice bin/sluice-new-round --schema schemas/record10.json --schema schemas/order30.json \
			--threads 1 --runs 5 --prompt-tokens 16 --gen-tokens 128 "$dir/110m-q8_0.gguf" 2>>"$dir/round-constrained.log"
		node run.mjs --sluice bin/sluice-new-round --schema schemas/record10.json --parallel 32 \
			--threads 1 --runs 3 --prompt-tokens 16 --gen-tokens 128 "$dir/110m-q8_0.gguf" 2>>"$dir/round-constrained.log"
		;;
	parallel)
		mk 110m-q8_0.gguf
		say "### 32 sequences over one (load $(load))"
		../scripts/parallel-ratio.sh "$dir/110m-q8_0.gguf" 3 "$here/bin/sluice-base-round" "$here/bin/sluice-new-round"
		;;
	prefill)
		for m in 110m-q4_k_m 110m-q5_k_m 110m-q6_k 1b-q4_k_m 1b-q5_k_m 1b-q6_k; do mk $m.gguf; done
		say "### K-quant prefill by CPU time and decode, 1 and 2 threads, native and AVX2 (load $(load))"
		RUNS=${RUNS:-5} RUNS1B=${RUNS1B:-2} sh kquant-prefill.sh "$new" "$base" "$dir" 2>>"$dir/round-kquant.log"
		echo
		;;
	ssd)
		mk 1b22-q8_0.gguf
		say "### A pass over streamed weights (load $(load))"
		sh ssd-panels.sh bin/sluice-base-round bin/sluice-new-round "$dir/1b22-q8_0.gguf" 1 | tee "$dir/round-ssd.log"
		echo
		;;
	specexec)
		say "### SpecExec over the TinyLlama-shaped target at ssd 25% (load $(load))"
		SLUICE="$new" ./specexec-ssd.sh "$dir/spec" ssd
		echo
		;;
	7b)
		for m in 7b-q4_0 7b-q4_k_m 7b-q8_0; do mk $m.gguf; done
		ms="$dir/7b-q4_0.gguf $dir/7b-q4_k_m.gguf $dir/7b-q8_0.gguf"
		say "### 7B at 2 threads, --tier ram (load $(load))"
		node run.mjs --sluice bin/sluice-new-round --sluice bin/sluice-new-round-avx2 --threads 2 --runs 2 \
			--prompt-tokens 128 --gen-tokens 32 --sluice-args="--tier ram" --bandwidth "$(echo $ms | tr ' ' ,)" \
			--json-out "$dir/round-7b.json" $ms 2>>"$dir/round-7b.log"
		echo
		say "### 7B peak RSS against file + KV (128 + 32 tokens, 2 threads, --tier ram)"
		echo "| file | kernels | file MB | KV MB | peak RSS MB | RSS ÷ (file + KV) |"
		echo "| --- | --- | ---: | ---: | ---: | ---: |"
		kv=$((2 * 32 * 4096 * 4 * 16 * ((128 + 32 + 15) / 16))) # f32 K and V, 32 layers × 4096, pages of 16
		for m in $ms; do
			j=$("$new" bench -m "$m" --tier ram --threads 2 --prompt-tokens 128 --gen-tokens 32 --runs 1 --json 2>/dev/null | tail -1)
			node -e '
				const [j, file, kv, name] = process.argv.slice(1);
				const r = JSON.parse(j), f = Number(file), k = Number(kv), mb = (x) => (x / 1e6).toFixed(0);
				console.log(`| ${name} | ${r.kernels} | ${mb(f)} | ${mb(k)} | ${mb(r.peak_rss_bytes)} | ${(r.peak_rss_bytes / (f + k)).toFixed(3)} |`);
			' "$j" "$(stat -c %s "$m")" "$kv" "$(basename "$m")"
		done
		;;
	*) echo "$0: unknown part $part" >&2; exit 2 ;;
	esac
done
