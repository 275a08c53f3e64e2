#!/usr/bin/env bash
# specexec-ssd.sh builds the realistic offloading target of issue 23 (Must
# show 2) under DIR and prints SpecExec against plain decoding on it:
#
#   target  stories260K widened to TinyLlama-1.1B's shape (gen-model
#           --widen-to tinyllama: dim 2048, hidden 5632, 22 layers, 32 heads,
#           4 KV heads, head dim 64; the same function, so the same text),
#           quantized to Q8_0 (~1.03 GB)
#   draft   stories260K quantized to Q8_0, in RAM
#
# and runs, 2 threads, greedy, page cache dropped before each run when this
# user may (root):
#   (a) --tier ssd --mem-budget a quarter of the target file: plain, SpecExec
#       at budgets 8 16 32 64 128 and auto;
#   (b) --tier ram: the same rows (the compute-bound case).
# Each row: decode tok/s, × plain, tokens per target pass, the target pass's
# mean wall time at 1 row (plain) and at its largest row count, the budgets
# used (auto: rounds per budget), user+sys CPU seconds, and whether the text
# is byte-identical to plain's (md5).
#
# Usage: bench/specexec-ssd.sh DIR [ssd|ram|both]
# Environment: MODELS (default ../shared/models beside the repository),
# SLUICE (a built binary; default: go build into DIR), GEN (generated
# tokens, default 48), CHECK=0 (skip the text check), RENDER=1 (print
# the table of the runs already in DIR, without running), PROMPT (prompt tokens, default 16), DEPTH (max tree
# depth, default 24), BUDGETS (default "8 16 32 64 128").
set -euo pipefail
dir=${1:?usage: $0 DIR [ssd|ram|both]}
which=${2:-both}
repo=$(cd "$(dirname "$0")/.." && pwd)
models=${MODELS:-$repo/../shared/models}
gen=${GEN:-48}
prompt=${PROMPT:-16}
depth=${DEPTH:-24}
budgets=${BUDGETS:-8 16 32 64 128}
mkdir -p "$dir"
sluice=${SLUICE:-$dir/sluice}
if [ -z "${SLUICE:-}" ]; then
	(cd "$repo" && go build -o "$sluice" ./cmd/sluice)
fi
src=$models/stories260K-gguf/stories260K.gguf
target=$dir/tinyllama-shape-q8_0.gguf
draft=$dir/stories260K-q8_0.gguf
if [ ! -s "$target" ]; then
	"$sluice" gen-model --widen-to tinyllama --from "$src" --context 512 -o "$dir/tinyllama-shape-f32.gguf"
	"$sluice" quantize -m "$dir/tinyllama-shape-f32.gguf" -o "$target" --type q8_0
	rm -f "$dir/tinyllama-shape-f32.gguf" # 3.9 GB
fi
if [ ! -s "$draft" ]; then
	"$sluice" quantize -m "$src" -o "$draft" --type q8_0
fi

# The widened Q8_0 target's greedy text is stories260K's (CHECK=0 skips it).
if [ "${CHECK:-1}" != 0 ] && [ "${RENDER:-0}" != 1 ]; then
	want=$("$sluice" generate -m "$src" --temp 0 -n 64 -p "Once upon a time" | md5sum | cut -d' ' -f1)
	got=$("$sluice" generate -m "$target" --temp 0 -n 64 -p "Once upon a time" --threads 2 | md5sum | cut -d' ' -f1)
	if [ "$want" != "$got" ]; then
		echo "the widened target's greedy text differs from stories260K's ($got, want $want)" >&2
		exit 1
	fi
	echo "greedy text (64 tokens): widened Q8_0 target = stories260K ($got)"
fi

size=$(stat -L -c %s "$target")
quarter=$((size / 4))
grep -o 'avx512[a-z]*\|avx2\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ' || true
echo
echo "target $target ($size bytes), draft $draft, 2 threads, --prompt-tokens $prompt --gen-tokens $gen --max-depth $depth"

drop() {
	sync
	if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# run TIER NAME ARGS...: one bench run, its JSON in $dir/NAME.json, its
# user and system CPU seconds in $dir/NAME.cpu. RENDER=1 only prints the
# table of the JSON files already there.
run() {
	local tier=$1 name=$2
	shift 2
	if [ "${RENDER:-0}" = 1 ]; then return; fi
	local tierArgs=(--tier "$tier")
	if [ "$tier" = ssd ]; then tierArgs+=(--mem-budget "$quarter"); fi
	drop
	/usr/bin/time -o "$dir/$name.cpu" -f '%U %S' "$sluice" bench -m "$target" "${tierArgs[@]}" --threads 2 \
		--prompt-tokens "$prompt" --gen-tokens "$gen" --runs 1 --json "$@" >"$dir/$name.json" 2>"$dir/$name.err" || true
	if [ ! -s "$dir/$name.json" ]; then
		echo "$name failed:" >&2
		cat "$dir/$name.err" >&2
		exit 1
	fi
}

cpu() { awk '{printf "%.1f", $1+$2}' "$dir/$1.cpu"; }

table() {
	local tier=$1
	echo
	echo "## --tier $tier$([ "$tier" = ssd ] && echo " --mem-budget $quarter (25%)") — load: $(cut -d' ' -f1-3 /proc/loadavg)"
	run "$tier" "$tier-plain"
	local plain plainMD5
	plain=$(jq -r .decode_tok_s "$dir/$tier-plain.json")
	plainMD5=$(jq -r .text_md5 "$dir/$tier-plain.json")
	echo "| run | tok/s | × plain | tokens / target pass | target pass wall time by rows (mean s) | rounds by budget (last) | cpu u+s | text = plain |"
	echo "| --- | ---: | ---: | ---: | --- | --- | ---: | --- |"
	echo "| plain | $(printf %.3f "$plain") | 1.00 | 1 | 1: $(awk -v t="$plain" 'BEGIN{printf "%.3f", 1/t}') (1/tok/s) | - | $(cpu "$tier-plain") | $plainMD5 |"
	for b in $budgets auto; do
		local n=$tier-specexec-$b
		run "$tier" "$n" --draft "$draft" --spec specexec --budget "$b" --max-depth "$depth"
		jq -r --arg name "specexec $b" --argjson plain "$plain" --arg md5 "$plainMD5" --arg cpu "$(cpu "$n")" '
			(.spec.target_pass_seconds // {} | to_entries | map({r: (.key|tonumber), m: .value.mean, n: .value.n}) | sort_by(.r)
				| map("\(.r): \(.m*1000|round/1000) (\(.n))") | join(", ")) as $passes |
			(.spec.budgets // {} | to_entries | map({b: (.key|tonumber), n: .value}) | sort_by(.b) | map("\(.b):\(.n)") | join(" ")) as $bud |
			"| \($name) | \(.decode_tok_s*1000|round/1000) | \(.decode_tok_s/$plain*100|round/100) | \(.spec.tokens_per_target_pass*100|round/100) | \($passes) | \($bud) (\(.spec.last_budget)) | \($cpu) | \(if .text_md5 == $md5 then "yes" else "NO: \(.text_md5)" end) |"' "$dir/$n.json"
	done
}

case $which in
ssd) table ssd ;;
ram) table ram ;;
both)
	table ssd
	table ram
	;;
*)
	echo "$0: the second argument is ssd, ram or both, not $which" >&2
	exit 2
	;;
esac
