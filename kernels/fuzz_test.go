package kernels_test

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// FuzzMatVec reads arbitrary bytes as weight data of every dtype (every scale
// and value bit pattern, NaN and Inf included) and checks MatMul against ref
// (bit for bit on the generic kernels, within tolerance on a fast path),
// single- and multi-threaded, and the two against each other bit for bit.
func FuzzMatVec(f *testing.F) {
	f.Add([]byte{0x00, 0x3c, 1, 2, 3, 0xff, 0x80, 0x7f}, uint8(0), uint64(1))
	f.Add(make([]byte, 3*tensor.Q8_0BlockLen), uint8(3), uint64(2))
	f.Add([]byte{0x00, 0x7c, 0x88, 0x11}, uint8(4), uint64(3))
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"), uint8(1), uint64(4))
	p := kernels.NewPool(3)
	f.Cleanup(p.Close)
	f.Fuzz(func(t *testing.T, data []byte, sel uint8, seed uint64) {
		dt := dtypes[int(sel)%len(dtypes)]
		bs, bb := dt.BlockSize(), dt.BlockBytes()
		blocks := len(data) / bb
		if blocks == 0 {
			return
		}
		rows := 1 + int(sel)/len(dtypes)%3
		for blocks%rows != 0 {
			rows--
		}
		cols := blocks / rows * bs
		w := kernels.Weight{DType: dt, Data: data[:blocks*bb], Rows: rows, Cols: cols}
		r := rand.New(rand.NewPCG(seed, seed^0xabcdef))
		const n = 2
		x := vec(r, n*cols, special)
		want := make([]float32, n*rows)
		ref.MatMul(want, w, x, n)
		got := make([]float32, n*rows)
		kernels.MatMul(nil, got, w, x, n)
		requireMatRef(t, "inline", w, x, n, want, got)
		pooled := make([]float32, n*rows)
		restore := kernels.SetParallelMinMACs(1)
		kernels.MatMul(p, pooled, w, x, n)
		restore()
		requireSame(t, "pool vs inline", got, pooled)
	})
}

// FuzzAttentionMask decodes arbitrary bytes into mask rows (Lo, Hi, tree
// bits, TreeBase, possibly out of range) and checks generic against ref.
func FuzzAttentionMask(f *testing.F) {
	f.Add([]byte{0, 4, 0xff, 0, 1, 5, 0x0f, 2, 3, 3, 0, 0}, uint8(7), uint64(1))
	f.Add([]byte{2, 9, 0x55, 1}, uint8(20), uint64(2))
	f.Add([]byte{}, uint8(0), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, n uint8, seed uint64) {
		kvLen := int(n) % 40
		rows := len(data) / 4
		if rows == 0 || rows > 16 {
			return
		}
		m := &kernels.Mask{}
		tree := data[0]&1 == 1
		for i := 0; i < rows; i++ {
			b := data[4*i : 4*i+4]
			m.Lo = append(m.Lo, int32(int8(b[0]))%48)
			m.Hi = append(m.Hi, int32(b[1])%48)
			if tree {
				base := int32(b[3]) % 48
				// b[2] as the bit pattern of every byte of the row's one word.
				m.Tree = append(m.Tree, []uint64{uint64(b[2]) * 0x0101010101010101})
				m.TreeBase = append(m.TreeBase, base)
			}
		}
		r := rand.New(rand.NewPCG(seed, 7))
		s := kernels.AttnShape{Heads: 2, KVHeads: 1, HeadDim: 3, Scale: 0.7}
		kv := pagedKV(vec(r, kvLen*3, normal), vec(r, kvLen*3, normal), kvLen, 3, 5)
		q := vec(r, rows*6, normal)
		want := make([]float32, len(q))
		// Tree rows have one word (64 slots); a tree row whose Hi-TreeBase
		// reaches past it is invalid input for both implementations.
		for i := 0; i < rows && tree; i++ {
			if min(int(m.Hi[i]), kvLen)-int(m.TreeBase[i]) > 64 {
				return
			}
		}
		ref.Attention(want, q, rows, kv, m, s)
		got := make([]float32, len(q))
		kernels.Attention(got, q, rows, kv, m, s, make([]float32, kernels.AttentionScratch(kv, rows)))
		requireAttnRef(t, "attention", q, rows, kv, m, s, want, got)
	})
}
