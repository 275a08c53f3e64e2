package kvcache

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// spill holds evicted page frames (one layer of one page: its keys, then its
// values) in an unlinked temporary file, so a KV budget moves cold pages to
// disk instead of dropping them. A frame written by put is read back byte
// for byte by get, which frees its place in the file for the next one.
//
// It is the storage half of Options.Budget (not wired yet: the cache
// allocates every page in memory); see the package's spill test.
type spill struct {
	mu         sync.Mutex
	f          *os.File
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
	return &spill{f: f, frameBytes: 4 * int64(frameFloats), at: map[frameKey]int64{}}, nil
}

func floatBytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// put writes frame (layer, page); kv is its keys and values, frameFloats
// long. A frame already spilled is overwritten in place.
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
		s.at[k] = off
	}
	s.spills++
	s.mu.Unlock()
	if _, err := s.f.WriteAt(floatBytes(kv), off); err != nil {
		return fmt.Errorf("kvcache: spill layer %d page %d: %w", layer, page, err)
	}
	return nil
}

// get reads frame (layer, page) back into kv and forgets it; false when it
// was not spilled.
func (s *spill) get(layer, page int32, kv []float32) (bool, error) {
	if int64(4*len(kv)) != s.frameBytes {
		return false, fmt.Errorf("kvcache: reload into %d floats, frames are %d bytes", len(kv), s.frameBytes)
	}
	s.mu.Lock()
	k := frameKey{layer, page}
	off, ok := s.at[k]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if _, err := s.f.ReadAt(floatBytes(kv), off); err != nil {
		return false, fmt.Errorf("kvcache: reload layer %d page %d: %w", layer, page, err)
	}
	s.mu.Lock()
	delete(s.at, k)
	s.free = append(s.free, off)
	s.reloads++
	s.mu.Unlock()
	return true, nil
}

// held is the number of frames in the file.
func (s *spill) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func (s *spill) close() error { return s.f.Close() }
