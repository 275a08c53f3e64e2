package llama2c_test

import (
	"bytes"
	"fmt"

	"github.com/sluicehq/sluice/format/llama2c"
)

// Write a tiny legacy checkpoint, then read its index back under GGUF names.
func Example() {
	cfg := llama2c.Config{Dim: 8, HiddenDim: 16, Layers: 1, Heads: 2, KVHeads: 1, VocabSize: 4, SeqLen: 2, SharedClassifier: true}
	tensors := map[string][]float32{}
	specs, _ := llama2c.Layout(cfg, 0)
	for _, s := range specs {
		tensors[s.Name] = make([]float32, s.Elements())
	}
	var buf bytes.Buffer
	if err := llama2c.Write(&buf, cfg, tensors); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(llama2c.Sniff(buf.Bytes()[:28]))

	f, err := llama2c.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "tiny.bin")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Meta["general.name"], f.Meta["llama.rope.dimension_count"], f.Meta["llama.attention.head_count_kv"])
	for _, t := range f.Tensors[:4] {
		fmt.Println(t.Name, t.Shape, t.Offset)
	}

	_, err = llama2c.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()-8), "cut.bin")
	fmt.Println(err)
	// Output:
	// true
	// tiny 4 1
	// token_embd.weight [4 8] 28
	// blk.0.attn_norm.weight [8] 156
	// blk.0.attn_q.weight [8 8] 188
	// blk.0.attn_k.weight [4 8] 444
	// llama2c: cut.bin: offset 2556: file is 2580 bytes, want 2588 for version 0 dim 8 hidden 16 layers 1 heads 2/1 vocab 4 seq_len 2, shared classifier: the freq_cis tables [2556,+32) are cut
}
