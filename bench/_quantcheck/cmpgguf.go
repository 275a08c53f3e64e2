// Command cmpgguf compares the tensors of two GGUF files by name: type,
// shape and bytes, and prints the count of each type that matched. With
// quantize.c it checks `sluice quantize --type q4_k_m` against llama.cpp's
// quantizer:
//
//	go run ./bench/_quantcheck/cmpgguf.go sluice.gguf llamacpp.gguf
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/sluicehq/sluice/format/gguf"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: cmpgguf A.gguf B.gguf")
		os.Exit(2)
	}
	a, b := open(os.Args[1]), open(os.Args[2])
	ra, rb := reader(os.Args[1]), reader(os.Args[2])
	same, diff := map[string]int{}, 0
	for _, t := range a.Tensors {
		u, ok := b.Tensor(t.Name)
		if !ok {
			fmt.Printf("%s: only in %s\n", t.Name, os.Args[1])
			diff++
			continue
		}
		da, db := make([]byte, t.Size), make([]byte, u.Size)
		if _, err := ra.ReadAt(da, t.Offset); err != nil && err != io.EOF {
			fail(err)
		}
		if _, err := rb.ReadAt(db, u.Offset); err != nil && err != io.EOF {
			fail(err)
		}
		if t.DType != u.DType || !slices.Equal(t.Shape, u.Shape) || !bytes.Equal(da, db) {
			fmt.Printf("%s: %v %v vs %v %v, bytes equal %v\n", t.Name, t.DType, t.Shape, u.DType, u.Shape, bytes.Equal(da, db))
			diff++
			continue
		}
		same[t.DType.String()]++
	}
	if len(a.Tensors) != len(b.Tensors) {
		fmt.Printf("%d tensors vs %d\n", len(a.Tensors), len(b.Tensors))
		diff++
	}
	fmt.Printf("identical: %v; differing: %d\n", same, diff)
	if diff > 0 {
		os.Exit(1)
	}
}

func open(path string) *gguf.File {
	f, err := gguf.Open(path)
	if err != nil {
		fail(err)
	}
	return f
}

func reader(path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		fail(err)
	}
	return f
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
