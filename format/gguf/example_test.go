package gguf_test

import (
	"bytes"
	"fmt"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

// Write a small model in memory and read its index back.
func Example() {
	w := gguf.NewWriter()
	w.AddKV("general.architecture", "llama")
	w.AddKV("llama.embedding_length", uint32(64))
	w.AddKV("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>"})
	w.AddTensor("token_embd.weight", tensor.F32, []int{3, 64}, make([]byte, 3*64*4))
	w.AddTensor("output_norm.weight", tensor.F32, []int{64}, make([]byte, 64*4))

	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		fmt.Println(err)
		return
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "mem.gguf")
	if err != nil {
		fmt.Println(err)
		return
	}
	dim, _ := f.Uint("llama.embedding_length")
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	fmt.Println(f.Arch(), dim, len(toks))
	for _, t := range f.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Offset-f.DataOffset, t.Size)
	}

	// A truncated copy fails with the file name, the offset and what was expected.
	_, err = gguf.Read(bytes.NewReader(buf.Bytes()[:buf.Len()-1]), int64(buf.Len()-1), "cut.gguf")
	fmt.Println(err)
	// Output:
	// llama 64 3
	// token_embd.weight f32 [3 64] 0 768
	// output_norm.weight f32 [64] 768 256
	// gguf: cut.gguf: offset 287: tensor "output_norm.weight" data [1088,+256) runs past end of file (size 1343)
}
