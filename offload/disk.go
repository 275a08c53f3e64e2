package offload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// align is the O_DIRECT alignment of buffer addresses, file offsets and
// lengths. 4 KiB covers every logical block size Linux filesystems use.
const align = 4096

func alignDown(x int64) int64 { return x &^ (align - 1) }
func alignUp(x int64) int64   { return (x + align - 1) &^ (align - 1) }

// ReadAtFunc reads len(p) bytes of the file at path from off, like
// io.ReaderAt. Options.ReadAt replaces the tier's own pread with one, so
// tests can inject short reads and I/O errors.
type ReadAtFunc func(path string, p []byte, off int64) (int, error)

// diskFile is one weight file the ssd tier reads on demand: opened with
// O_DIRECT where the filesystem allows it (reads bypass the page cache, so
// resident memory is what the budget says), buffered otherwise.
type diskFile struct {
	path     string
	size     int64 // at Open
	buffered *os.File
	direct   *os.File // nil: O_DIRECT unavailable

	mu     sync.Mutex // guards direct being dropped after a refused read
	logged bool
}

func openDisk(path string, log zerolog.Logger) (*diskFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("offload: %w", err)
	}
	d := &diskFile{path: path, size: st.Size(), buffered: f}
	df, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		d.logged = true
		log.Info().Str("file", path).Err(err).Msg("offload: O_DIRECT unavailable, ssd tier uses buffered reads (through the page cache)")
	} else {
		d.direct = df
	}
	return d, nil
}

// readAt fills p (page-aligned, len a multiple of align) from off (aligned)
// and returns how many bytes it got: fewer than len(p) only at the end of
// the file or on an error. A refused O_DIRECT read (EINVAL: the filesystem
// took the open but not the read) switches the file to buffered reads,
// logged once.
func (d *diskFile) readAt(p []byte, off int64, hook ReadAtFunc, log zerolog.Logger) (int, error) {
	if hook != nil {
		return fill(func(b []byte, o int64) (int, error) { return hook(d.path, b, o) }, p, off)
	}
	d.mu.Lock()
	f := d.direct
	d.mu.Unlock()
	if f != nil {
		n, err := fill(f.ReadAt, p, off)
		if !errors.Is(err, syscall.EINVAL) {
			return n, err
		}
		d.mu.Lock()
		if d.direct != nil {
			d.direct.Close()
			d.direct = nil
		}
		if !d.logged {
			d.logged = true
			log.Info().Str("file", d.path).Err(err).Msg("offload: O_DIRECT read refused, ssd tier falls back to buffered reads")
		}
		d.mu.Unlock()
	}
	return fill(d.buffered.ReadAt, p, off)
}

// fill reads until p is full, the file ends (io.EOF is not an error here:
// the caller checks it got the bytes it needs) or a read fails.
func fill(read func([]byte, int64) (int, error), p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := read(p[n:], off+int64(n))
		n += m
		if err == io.EOF || err == nil && m == 0 {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (d *diskFile) close() error {
	err := d.buffered.Close()
	if d.direct != nil {
		err = errors.Join(err, d.direct.Close())
	}
	return err
}

// segment is a run of tensors of one file read with one pread: the aligned
// file span [start, end) lands at slot offset at in the destination buffer.
type segment struct {
	file       int
	start, end int64 // aligned
	need       int64 // bytes from start that hold tensor data (the rest is alignment)
	at         int64 // offset in the buffer
	tensors    []*entry
	chunk0     int // id of its first chunk in the chunk cache (stream units)
}

// mergeGap is the largest hole between two tensors that one read still
// spans: reading it costs less than a second request.
const mergeGap = 64 << 10

// layout places the tensors (sorted by file and offset) into segments laid
// end to end from buffer offset base, and sets each tensor's offset in the
// buffer. It returns the bytes the segments take.
func layout(ts []*entry, base int64) ([]segment, int64) {
	var segs []segment
	at := base
	for _, e := range ts {
		r := e.ref
		if n := len(segs); n > 0 && segs[n-1].file == r.File && r.Offset >= segs[n-1].start+segs[n-1].need &&
			r.Offset-(segs[n-1].start+segs[n-1].need) <= mergeGap {
			s := &segs[n-1]
			s.need = r.Offset + r.Size - s.start
			at += alignUp(s.start+s.need) - s.end
			s.end = alignUp(s.start + s.need)
			s.tensors = append(s.tensors, e)
			e.at = s.at + r.Offset - s.start
			continue
		}
		start := alignDown(r.Offset)
		s := segment{file: r.File, start: start, need: r.Offset + r.Size - start, at: at, tensors: []*entry{e}}
		s.end = alignUp(s.start + s.need)
		e.at = s.at + r.Offset - start
		at += s.end - s.start
		segs = append(segs, s)
	}
	return segs, at - base
}

// readFault is a failed or short read of weights: which file, which tensor
// and where. Requests whose pass needed it fail with it; the store goes on.
type readFault struct {
	path   string
	tensor string
	off    int64 // file offset where the read failed
	toff   int64 // the tensor's offset
	got    int64 // bytes read of the segment, for a short read
	want   int64
	err    error // nil: a short read (the file ends early)
}

func (f *readFault) Error() string {
	if f.err == nil {
		return fmt.Sprintf("offload: %s: short read at offset %d: tensor %q at offset %d is cut off (got %d of %d bytes; the file was truncated?)",
			f.path, f.off, f.tensor, f.toff, f.got, f.want)
	}
	return fmt.Sprintf("offload: %s: read of tensor %q (at offset %d) failed at offset %d: %v", f.path, f.tensor, f.toff, f.off, f.err)
}

func (f *readFault) Unwrap() error { return f.err }

// readSegment reads s into buf[s.at:]; a failure names the first tensor it
// leaves incomplete.
func (st *streamStore) readSegment(s *segment, buf []byte) error {
	return st.readRange(s, s.start, s.end, buf)
}

// readRange reads the file span [a, b) of s (aligned, within it) into its
// place in buf; a failure names the first tensor it leaves incomplete.
func (st *streamStore) readRange(s *segment, a, b int64, buf []byte) error {
	d := st.files[s.file]
	dst := buf[s.at+(a-s.start) : s.at+(b-s.start)]
	need := min(b, s.start+s.need) - a // bytes that hold tensor data
	n, err := d.readAt(dst, a, st.o.ReadAt, st.o.Logger)
	if err == nil && int64(n) >= need {
		return nil
	}
	got := a + int64(n) // file offset the data stops at
	var in []*entry     // the tensors the span holds bytes of
	for _, t := range s.tensors {
		if t.ref.Offset < b && t.ref.Offset+t.ref.Size > a {
			in = append(in, t)
		}
	}
	if len(in) == 0 {
		in = s.tensors[len(s.tensors)-1:]
	}
	e := in[len(in)-1]
	for _, t := range in {
		if t.ref.Offset+t.ref.Size > got {
			e = t
			break
		}
	}
	f := &readFault{path: d.path, tensor: e.ref.Name, off: got, toff: e.ref.Offset, got: int64(n), want: need, err: err}
	if err != nil && len(in) > 1 {
		// Which tensor is unreadable: read them one at a time.
		for _, t := range in {
			start := alignDown(t.ref.Offset)
			tmp, _ := alignedHeap(alignUp(t.ref.Offset+t.ref.Size) - start)
			if m, terr := d.readAt(tmp, start, st.o.ReadAt, st.o.Logger); terr != nil {
				f.tensor, f.toff, f.off = t.ref.Name, t.ref.Offset, start+int64(m)
				break
			}
		}
	}
	return f
}

// ReadBandwidth measures how fast the ssd tier can read path: sequential
// preads of chunk bytes (aligned, O_DIRECT where the filesystem allows it,
// so the page cache does not flatter the figure) over up to total bytes
// from the start. It reports bytes per second and whether reads were direct.
func ReadBandwidth(path string, chunk, total int64) (float64, bool, error) {
	d, err := openDisk(path, zerolog.Nop())
	if err != nil {
		return 0, false, err
	}
	defer d.close()
	direct := d.direct != nil
	chunk = alignUp(max(chunk, align))
	buf, unmap := alignedBuf(chunk)
	if unmap != nil {
		defer syscall.Munmap(unmap)
	}
	total = min(total, d.size)
	start := time.Now()
	var done int64
	for done < total {
		n, err := d.readAt(buf, done, nil, zerolog.Nop())
		if err != nil {
			return 0, direct, fmt.Errorf("offload: %s at offset %d: %w", path, done, err)
		}
		if n == 0 {
			break
		}
		done += int64(n)
	}
	d.mu.Lock()
	direct = direct && d.direct != nil
	d.mu.Unlock()
	return float64(done) / time.Since(start).Seconds(), direct, nil
}
