package kvcache_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model/input"
)

// One decode loop: each step reserves a slot, writes the layer's K/V, reads
// the view and mask for attention, and ends the pass. Then a draft tree is
// verified in one pass and only its accepted path is kept.
func Example() {
	ctx := context.Background()
	c, err := kvcache.New(kvcache.Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	if err != nil {
		panic(err)
	}
	var b input.Batch
	for pos := range int32(3) {
		b.Reset()
		b.Add(100+pos, pos, 0, true)
		p, err := c.Begin(ctx, &b)
		if err != nil {
			panic(err)
		}
		x := []float32{float32(pos), 1}
		p.Layer(0).Put(x, x)
		kv := p.Layer(0).View(0) // then kernels.Attention(…, kv, p.Mask(), …)
		m := p.Mask()
		fmt.Printf("slot %d sees [%d,%d) of %d\n", p.Slots()[0], m.Lo[0], m.Hi[0], kv.Len)
		if err := p.End(); err != nil {
			panic(err)
		}
	}

	// A draft tree: root r (slot 3) with children a, b; a has child c.
	b.Reset()
	for _, parent := range []int32{-1, 0, 0, 1} {
		i := b.Add(0, 0, 0, true)
		b.Parent[i] = parent
	}
	p, err := c.Begin(ctx, &b)
	if err != nil {
		panic(err)
	}
	p.Layer(0).Put(make([]float32, 8), make([]float32, 8))
	// r is linear history (the tree's root); the tree starts at slot 4.
	m := p.Mask()
	for i, row := range m.Tree {
		if row == nil {
			fmt.Printf("row %d: root\n", i)
			continue
		}
		fmt.Printf("row %d ancestors %03b from slot %d\n", i, row[0], m.TreeBase[i])
	}
	if err := p.End(); err != nil {
		panic(err)
	}
	// The verifier accepted r → a → c.
	if err := c.Commit(0, []int32{0, 1, 3}); err != nil {
		panic(err)
	}
	fmt.Println("len", c.Len(0), "pages", c.Stats().PagesInUse)
	// Output:
	// slot 0 sees [0,1) of 1
	// slot 1 sees [0,2) of 2
	// slot 2 sees [0,3) of 3
	// row 0: root
	// row 1 ancestors 001 from slot 4
	// row 2 ancestors 010 from slot 4
	// row 3 ancestors 101 from slot 4
	// len 6 pages 2
}

// A draft tree grown over two passes: the children of the root come first,
// then a grandchild whose parent is a slot of the earlier pass; one path is
// kept.
func ExampleCache_CommitPath() {
	ctx := context.Background()
	c, err := kvcache.New(kvcache.Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64})
	if err != nil {
		panic(err)
	}
	run := func(b *input.Batch) {
		p, err := c.Begin(ctx, b)
		if err != nil {
			panic(err)
		}
		x := make([]float32, 2*b.Len())
		p.Layer(0).Put(x, x)
		m := p.Mask()
		for i := range b.Len() {
			vis := ""
			for j := range int32(6) {
				vis += map[bool]string{true: "x", false: "."}[m.Visible(i, j)]
			}
			fmt.Printf("slot %d sees %s\n", p.Slots()[i], vis)
		}
		if err := p.End(); err != nil {
			panic(err)
		}
	}
	var b input.Batch
	b.Add(1, 0, 0, false) // a prompt of two tokens; slot 1 is the root
	b.Add(2, 1, 0, true)
	run(&b)

	b.Reset()
	b.AddChild(3, 2, 0, -1, 1, true) // two children of the root (slot 1)
	b.AddChild(4, 2, 0, -1, 1, true)
	run(&b)

	b.Reset()
	b.AddChild(5, 3, 0, -1, 3, true) // a child of slot 3, reserved by the last pass
	b.AddChild(6, 4, 0, 0, -1, true) // and its child, in this batch
	run(&b)

	if err := c.CommitPath(0, []int32{3, 4, 5}); err != nil {
		panic(err)
	}
	fmt.Println("len", c.Len(0))
	// Output:
	// slot 0 sees x.....
	// slot 1 sees xx....
	// slot 2 sees xxx...
	// slot 3 sees xx.x..
	// slot 4 sees xx.xx.
	// slot 5 sees xx.xxx
	// len 5
}
