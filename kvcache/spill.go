package kvcache

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// spill holds page frames (one layer of one page: its keys, then its values)
// that the KV budget moved out of memory, in an unlinked temporary file. A
// frame written by put is read back byte for byte by read; the copy stays in
// the file until drop (its page was freed) or the next put of the same frame
// overwrites it in place, so a frame that was read back and not changed can
// leave memory again without being written.
type spill struct {
	mu         sync.Mutex
	f          *os.File
	name       string
	frameBytes int64
	at         map[frameKey]int64 // frame → file offset
	free       []int64
	end        int64
	spills     int64 // frames written
	reloads    int64 // frames read back
}

type frameKey struct{ layer, page int32 }

// openSpill creates the spill file in dir ("" = the system's temp dir) for
// frames of frameFloats float32 values (keys and values of one page of one
// layer). The file is unlinked at once: it goes away with the process.
func openSpill(dir string, frameFloats int) (*spill, error) {
	f, err := os.CreateTemp(dir, "sluice-kv-spill-*")
	if err != nil {
		return nil, fmt.Errorf("kvcache: spill file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("kvcache: spill file: %w", err)
	}
	return &spill{f: f, name: f.Name(), frameBytes: 4 * int64(frameFloats), at: map[frameKey]int64{}}, nil
}

func floatBytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// put writes frame (layer, page); kv is its keys and values, frameFloats
// long. A frame already in the file is overwritten in place.
func (s *spill) put(layer, page int32, kv []float32) error {
	if int64(4*len(kv)) != s.frameBytes {
		return fmt.Errorf("kvcache: spill of %d floats, frames are %d bytes", len(kv), s.frameBytes)
	}
	s.mu.Lock()
	k := frameKey{layer, page}
	off, ok := s.at[k]
	if !ok {
		if n := len(s.free); n > 0 {
			off, s.free = s.free[n-1], s.free[:n-1]
		} else {
			off, s.end = s.end, s.end+s.frameBytes
		}
	}
	s.mu.Unlock()
	if n, err := s.f.WriteAt(floatBytes(kv), off); err != nil {
		if !ok {
			s.mu.Lock()
			s.free = append(s.free, off)
			s.mu.Unlock()
		}
		return fmt.Errorf("kvcache: spill file %s: write of layer %d page %d at offset %d: %d of %d bytes: %w", s.name, layer, page, off, n, s.frameBytes, err)
	}
	s.mu.Lock()
	s.at[k] = off
	s.spills++
	s.mu.Unlock()
	return nil
}

// read reads frame (layer, page) into kv; false when the file does not hold
// it. The copy stays in the file.
func (s *spill) read(layer, page int32, kv []float32) (bool, error) {
	if int64(4*len(kv)) != s.frameBytes {
		return false, fmt.Errorf("kvcache: reload into %d floats, frames are %d bytes", len(kv), s.frameBytes)
	}
	s.mu.Lock()
	off, ok := s.at[frameKey{layer, page}]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if n, err := s.f.ReadAt(floatBytes(kv), off); err != nil {
		return false, fmt.Errorf("kvcache: spill file %s: read of layer %d page %d at offset %d: %d of %d bytes: %w", s.name, layer, page, off, n, s.frameBytes, err)
	}
	s.mu.Lock()
	s.reloads++
	s.mu.Unlock()
	return true, nil
}

// has reports whether the file holds frame (layer, page).
func (s *spill) has(layer, page int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.at[frameKey{layer, page}]
	return ok
}

// drop forgets frame (layer, page), if held, freeing its place in the file.
func (s *spill) drop(layer, page int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := frameKey{layer, page}
	if off, ok := s.at[k]; ok {
		delete(s.at, k)
		s.free = append(s.free, off)
	}
}

// held is the number of frames in the file.
func (s *spill) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// counts returns the frames written and read back so far.
func (s *spill) counts() (spills, reloads int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spills, s.reloads
}

func (s *spill) close() error { return s.f.Close() }
