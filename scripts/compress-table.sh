#!/usr/bin/env bash
# Prints the README's compression table: for each model and each scheme, bytes
# on disk, decode tok/s (1 thread), perplexity on the committed corpus, and KL
# and top-1 agreement against the F32 model. Usage: scripts/compress-table.sh
set -euo pipefail
cd "$(dirname "$0")/.."
M=../shared/models
[ -d "$M/stories260K" ] || { echo "../shared/models absent" >&2; exit 1; }
go build -o bin/sluice ./cmd/sluice
S=bin/sluice
TOK=$M/stories260K/tok512.bin
TEXT=eval/testdata/stories260K-corpus.txt
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
for pair in "stories260K:$M/stories260K/stories260K.bin" "llama2xs-260k:$M/llama2xs-260k/llama2xs_model.bin"; do
	name=${pair%%:*} bin=${pair#*:}
	base=$OUT/$name-f32.gguf
	$S convert "$bin" --tokenizer "$TOK" -o "$base" >/dev/null
	echo
	echo "**$name** (corpus: $TEXT, $(wc -c <"$TEXT") bytes)"
	echo
	echo "| scheme | bytes on disk | decode tok/s | perplexity | KL vs F32 | top-1 vs F32 |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: |"
	for s in f32 q8_0 q4_0 int8-g32 int4-g32 int4-g128 nf4 q6_k q5_k_m q5_k_s q4_k_m q4_k_s q3_k_m q2_k prune-50 prune-2:4; do
		f=$OUT/$name-$s.gguf
		case $s in
		f32) ;;
		prune-50) $S prune -m "$base" -o "$f" --sparsity 0.5 >/dev/null ;;
		prune-2:4) $S prune -m "$base" -o "$f" --nm 2:4 >/dev/null ;;
		*) $S quantize -m "$base" -o "$f" --type "$s" >/dev/null ;;
		esac
		bytes=$(stat -c %s "$f")
		tps=$($S bench -m "$f" --threads 1 --prompt-tokens 16 --gen-tokens 200 --runs 3 --json | json "['decode_tok_s']")
		ev=$($S eval -m "$f" --text "$TEXT" --ref "$base" --ctx 256 --json)
		ppl=$(echo "$ev" | json "['perplexity']")
		kl=$(echo "$ev" | json "['kl_divergence']")
		top=$(echo "$ev" | json "['top1_agreement']")
		printf '| %s | %d | %.0f | %.3f | %.4f | %.3f |\n' "$s" "$bytes" "$tps" "$ppl" "$kl" "$top"
	done
done
