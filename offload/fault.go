package offload

import (
	"fmt"
	"runtime/debug"
	"unsafe"
)

// Faulter is a store whose weights are memory that the kernels read in
// place (the mmap tier), where a file truncated or unreadable while running
// faults on the reading goroutine (SIGBUS) instead of failing a read.
type Faulter interface {
	// FaultAt names what lies at addr: a *MapFault if addr is in one of the
	// store's mapped files, else nil.
	FaultAt(addr uintptr) error
}

// MapFault is a memory fault reading mapped weights: which file, which
// tensor and where. Requests whose pass touched it fail with it; the
// process goes on.
type MapFault struct {
	Path         string
	Tensor       string // "" when no tensor covers Offset
	Offset       int64  // file offset of the faulting byte
	TensorOffset int64
	Addr         uintptr
}

func (f *MapFault) Error() string {
	if f.Tensor == "" {
		return fmt.Sprintf("offload: %s: memory fault at file offset %d, outside every tensor (mmap tier: was the file truncated or changed while running?)", f.Path, f.Offset)
	}
	return fmt.Sprintf("offload: %s: memory fault reading tensor %q (at offset %d) at file offset %d (mmap tier: the file was truncated or cannot be read while running)",
		f.Path, f.Tensor, f.TensorOffset, f.Offset)
}

// FaultAt implements Faulter for the mmap tier.
func (s *memStore) FaultAt(addr uintptr) error {
	for i, f := range s.files {
		if !f.mapped || len(f.data) == 0 {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
		if addr < base || addr >= base+uintptr(len(f.data)) {
			continue
		}
		mf := &MapFault{Path: f.path, Offset: int64(addr - base), Addr: addr}
		for name, r := range s.index {
			if r.File == i && r.Offset <= mf.Offset && mf.Offset < r.Offset+r.Size {
				mf.Tensor, mf.TensorOffset = name, r.Offset
				break
			}
		}
		return mf
	}
	return nil
}

// faultAddr reports whether a recovered panic value is a memory fault made
// a panic by debug.SetPanicOnFault, and where.
func faultAddr(v any) (uintptr, bool) {
	e, ok := v.(interface {
		error
		Addr() uintptr
	})
	if !ok {
		return 0, false
	}
	return e.Addr(), true
}

// Guard runs fn with memory faults on this goroutine turned into panics
// (debug.SetPanicOnFault) and returns such a fault as an error: a
// *MapFault naming file, tensor and offset when s maps the address (see
// Faulter), else an error with the address. kernels.Pool's helpers pass a
// fault on their chunk back to the goroutine that called the pool, so a
// pass guarded here catches faults in its parallel kernels too. Other
// panics propagate unchanged.
func Guard(s Store, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if v := recover(); v != nil {
			addr, ok := faultAddr(v)
			if !ok {
				panic(v)
			}
			if f, ok := s.(Faulter); ok {
				if ferr := f.FaultAt(addr); ferr != nil {
					err = ferr
					return
				}
			}
			err = fmt.Errorf("offload: memory fault at address %#x: %v", addr, v)
		}
	}()
	return fn()
}
