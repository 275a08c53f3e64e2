// The ssd tier's plan: Plan splits the tensors into the pinned set and the
// streamed layers (whole, or split into tensors when two layers do not fit
// beside the pins), sizes the ring and leaves the rest of the budget to the
// chunk cache (planCache); fillSegment reads a pinned segment. The ring that
// streams the layers is ring.go; the whole design is described there.

package offload

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/kernels"
)

// layerPlan is one layer: its tensors and how they are read.
type layerPlan struct {
	pos     int      // stream position, -1 pinned
	tensors []*entry // in file order
	order   []*entry // as Layout listed them: the order the block acquires them
	segs    []segment
	bytes   int64 // buffer bytes
	pack    bool  // streamed, and a tensor of it is laid out in panels after each read (entry.layout)
}

// Plan implements Planner.
func (s *streamStore) Plan(ctx context.Context, l Usage) error {
	if s.planned {
		return fmt.Errorf("offload: the store is planned already")
	}
	s.planned = true
	for _, r := range l.Rows {
		if e := s.ents[r.Name]; e != nil && e.ref.Offset == r.Offset && e.ref.File == r.File && r.Rows() > 0 && r.Size%int64(r.Rows()) == 0 {
			e.rows = true
		}
	}
	for li, refs := range l.Layers {
		lp := &layerPlan{pos: -1}
		for _, r := range refs {
			e := s.ents[r.Name]
			if e == nil || e.ref.Offset != r.Offset || e.ref.File != r.File {
				return fmt.Errorf("offload: layer %d names tensor %q the store does not hold", li, r.Name)
			}
			if e.layer >= 0 {
				if e.layer == li {
					continue
				}
				return fmt.Errorf("offload: tensor %q is in layers %d and %d", r.Name, e.layer, li)
			}
			e.layer, e.unit = li, li
			lp.tensors = append(lp.tensors, e)
		}
		lp.order = slices.Clone(lp.tensors)
		sortEntries(lp.tensors)
		lp.segs, lp.bytes = layout(lp.tensors, 0)
		s.layers = append(s.layers, lp)
	}
	var rest []*entry
	for _, e := range s.ents {
		if e.layer < 0 && !e.rows {
			rest = append(rest, e)
		}
	}
	sortEntries(rest)
	restSegs, restBytes := layout(rest, 0)

	var all, maxLayer int64 = restBytes, 0
	for _, lp := range s.layers {
		all += lp.bytes
		maxLayer = max(maxLayer, lp.bytes)
	}
	budget := s.o.Budget
	nPinned, ring := len(s.layers), 0
	minRing := 2
	if budget > 0 && budget < all && budget < restBytes+2*maxLayer && len(s.layers) > 0 {
		whole := restBytes + 2*maxLayer
		units, small, k := splitLayers(s.layers)
		small = append(small, rest...)
		sortEntries(small)
		smallSegs, smallBytes := layout(small, 0)
		var maxUnit int64
		for _, u := range units {
			maxUnit = max(maxUnit, u.bytes)
		}
		k = max(k, 1)
		if minimum := smallBytes + int64(k)*maxUnit; minimum < whole {
			s.split, s.layers, rest, restSegs, restBytes, maxLayer, minRing = true, units, small, smallSegs, smallBytes, maxUnit, k
			for i, u := range units {
				u.tensors[0].unit = i
			}
			for _, e := range small {
				e.unit = -1
			}
		}
		if minimum := restBytes + int64(minRing)*maxLayer; s.split && budget < minimum {
			return fmt.Errorf("offload: a memory budget of %s is below the minimum of %s for %s: whole layers need %s (the pinned set and a ring of 2 layer buffers), and streaming tensor by tensor needs the pinned set (output head, norms, small layer tensors: %s) and a ring of %d buffers of the largest tensor (%s), one per large tensor a layer holds",
				FormatBytes(budget), FormatBytes(minimum), s.files[0].path, FormatBytes(whole), FormatBytes(restBytes), minRing, FormatBytes(maxLayer))
		}
		if s.split && budget >= restBytes+int64(minRing+1)*maxLayer {
			minRing++ // the buffer that overlaps reads with compute comes before pinned units
		}
	}
	if budget == 0 || budget < all {
		// Stream: the pinned set, then whole layers (units) while the
		// minimum ring still fits.
		minimum := restBytes + int64(minRing)*maxLayer
		if budget > 0 && budget < minimum {
			return fmt.Errorf("offload: a memory budget of %s is below the minimum of %s for %s: the pinned set (output head, norms; the embedding too when the head shares it) takes %s and a ring of 2 layer buffers %s (a layer is %s)",
				FormatBytes(budget), FormatBytes(minimum), s.files[0].path, FormatBytes(restBytes), FormatBytes(2*maxLayer), FormatBytes(maxLayer))
		}
		if budget == 0 {
			budget = minimum
		}
		used := restBytes + int64(minRing)*maxLayer
		nPinned = 0
		for nPinned < len(s.layers) && used+s.layers[nPinned].bytes <= budget {
			used += s.layers[nPinned].bytes
			nPinned++
		}
		ring = minRing + int((budget-used)/max(maxLayer, 1))
		ring = min(ring, len(s.layers)-nPinned)
		if nPinned == len(s.layers) {
			ring = 0
		}
		if k := s.o.cacheLayers; k > 0 && ring > 0 {
			nPinned -= min(k, nPinned) // tests: their bytes go to the chunk cache
		}
	}

	// The pinned set: the rest, then the pinned layers, in one buffer.
	pinBytes := restBytes
	type pinnedSegs struct {
		segs []segment
	}
	groups := []pinnedSegs{{restSegs}}
	for i := range nPinned {
		lp := s.layers[i]
		segs, n := layout(lp.tensors, pinBytes)
		lp.segs = segs
		groups = append(groups, pinnedSegs{segs})
		pinBytes += n
	}
	s.pinned, s.pinUnmap = alignedBuf(pinBytes)
	s.pinBytes = pinBytes
	for _, g := range groups {
		for i := range g.segs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.readSegment(&g.segs[i], s.pinned); err != nil {
				return err
			}
			for _, e := range g.segs[i].tensors {
				end := e.at + e.ref.Size
				e.view = &view{b: s.pinned[e.at:end:end]}
				l, err := repack(s.o.Panels, e.ref.info(), e.view.b)
				if err != nil {
					return err
				}
				e.view.layout = l
			}
		}
	}
	for i := nPinned; i < len(s.layers); i++ {
		lp := s.layers[i]
		lp.pos = len(s.stream)
		s.stream = append(s.stream, lp)
		for _, e := range lp.tensors {
			if e.layout = panelsOf(s.o.Panels, e.ref.info()); e.layout != kernels.RowMajor {
				lp.pack = true
			}
		}
	}
	for range ring {
		b, u := alignedBuf(maxLayer)
		s.slots = append(s.slots, &slot{buf: b, unmap: u, cur: -1})
	}
	s.slotBytes = maxLayer
	if err := s.planCache(pinBytes, maxLayer); err != nil {
		return err
	}
	if ring > 0 {
		s.jobs = make(chan *load, ring)
		s.packs = make(chan *load, ring)
		s.quit = make(chan struct{})
		s.wg.Add(2)
		go s.loader()
		go s.packer()
	}
	s.o.Logger.Info().Str("pinned", FormatBytes(pinBytes)).Int("pinned_layers", nPinned).Int("streamed_layers", len(s.stream)).
		Int("ring", ring).Str("layer", FormatBytes(maxLayer)).Str("chunk_cache", FormatBytes(s.cache.stats().bytes)).
		Str("budget", FormatBytes(s.o.Budget)).Msg("offload: ssd tier planned")
	return nil
}

// planCache gives what the budget leaves after the pinned set (pinBytes)
// and the ring to a chunk cache of the streamed units, in chunks of
// chunkSize(unit); none without a budget, or with room for no chunk.
func (s *streamStore) planCache(pinBytes, unit int64) error {
	left := s.o.Budget - pinBytes - int64(len(s.slots))*unit
	if s.o.Budget <= 0 || len(s.stream) == 0 || left <= 0 {
		return nil
	}
	cs := chunkSize(unit)
	frames := left / cs
	if frames == 0 {
		return nil
	}
	ids, most := 0, 0
	for _, lp := range s.stream {
		n := 0
		for i := range lp.segs {
			sg := &lp.segs[i]
			sg.chunk0 = ids
			k := int((sg.end - sg.start + cs - 1) / cs)
			ids += k
			n = max(n, k)
		}
		most = max(most, n)
	}
	c, err := newChunkCache(int(min(frames, int64(ids))), cs, ids)
	if err != nil {
		return err
	}
	c.churn, c.poison = s.o.chunkChurn, s.o.poison
	s.cache, s.chunkSrc = c, make([][]byte, most)
	return nil
}

// fillSegment reads segment sg of a stream unit into buf: the chunks the
// cache holds are copied from it, the others read from the disk, one pread
// per run of them, and offered to the cache. It returns the bytes read
// from the disk.
func (s *streamStore) fillSegment(sg *segment, buf []byte) (int64, error) {
	c := s.cache
	if c == nil {
		if err := s.readSegment(sg, buf); err != nil {
			return 0, err
		}
		return sg.end - sg.start, nil
	}
	span := func(j int) (int64, int64) {
		a := sg.start + int64(j)*c.size
		return a, min(a+c.size, sg.end)
	}
	n := int((sg.end - sg.start + c.size - 1) / c.size)
	src := s.chunkSrc[:n]
	for j := range n {
		a, b := span(j)
		src[j] = c.get(sg.chunk0+j, b-a) // pinned until copied
	}
	defer func() {
		for j := range n {
			if src[j] != nil {
				src[j] = nil
				c.unpin(sg.chunk0 + j)
			}
		}
	}()
	var disk int64
	for j := 0; j < n; {
		a, b := span(j)
		if src[j] != nil {
			at := sg.at + a - sg.start
			copy(buf[at:at+b-a], src[j])
			j++
			continue
		}
		k := j + 1
		for k < n && src[k] == nil {
			k++
		}
		_, e := span(k - 1)
		if err := s.readRange(sg, a, e, buf); err != nil {
			return disk, err
		}
		disk += e - a
		for ; j < k; j++ {
			a, b := span(j)
			at := sg.at + a - sg.start
			c.offer(sg.chunk0+j, buf[at:at+b-a])
		}
	}
	return disk, nil
}

// splitLayers plans stream units of single tensors: every large tensor of
// a layer (more than 1/16 of its bytes), layer after layer, each layer's in
// the order its block acquires them (Layout's), so that the read ahead is
// of the tensor the compute needs next; the others are
// returned as small (to pin), with the most large tensors one layer has.
// It changes no entry (the plan is taken only when its minimum is lower);
// the layout of a unit is computed afresh when it is pinned.
func splitLayers(layers []*layerPlan) (units []*layerPlan, small []*entry, k int) {
	for _, lp := range layers {
		n := 0
		for _, e := range lp.order {
			if e.ref.Size*16 <= lp.bytes {
				small = append(small, e)
				continue
			}
			u := &layerPlan{pos: -1, tensors: []*entry{e}}
			u.segs, u.bytes = layout(u.tensors, 0)
			units = append(units, u)
			n++
		}
		k = max(k, n)
	}
	return units, small, k
}

func sortEntries(es []*entry) {
	slices.SortFunc(es, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.ref.File, b.ref.File), cmp.Compare(a.ref.Offset, b.ref.Offset))
	})
}
