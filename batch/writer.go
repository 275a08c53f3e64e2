package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sync"
)

// Writer writes one JSON Result per line. Each line goes to the underlying
// writer in a single Write call (and is flushed, if the writer buffers), so
// a crash loses at most the line being written, and that line is torn, never
// interleaved: Done ignores it and Resume removes it. Safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
}

// NewWriter writes results to w (usually a file opened by Resume).
func NewWriter(w io.Writer) *Writer {
	bw := &Writer{w: w}
	bw.enc = json.NewEncoder(&bw.buf)
	bw.enc.SetEscapeHTML(false) // model text is not HTML: keep <, > and & readable
	return bw
}

// Write appends r as one line. Timings that are not finite numbers are
// dropped rather than failing the line; timings are rounded to microseconds.
func (w *Writer) Write(r Result) error {
	r.PrefillMS, r.DecodeMS = millis(r.PrefillMS), millis(r.DecodeMS)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	if err := w.enc.Encode(r); err != nil { // Encode appends the newline
		return fmt.Errorf("batch: encode result %q: %w", r.CustomID, err)
	}
	n, err := w.w.Write(w.buf.Bytes())
	if err == nil && n < w.buf.Len() {
		err = io.ErrShortWrite
	}
	if err == nil {
		if f, ok := w.w.(interface{ Flush() error }); ok {
			err = f.Flush()
		}
	}
	if err != nil {
		return fmt.Errorf("batch: write result %q: %w", r.CustomID, err)
	}
	return nil
}

func millis(ms float64) float64 {
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return 0
	}
	return math.Round(ms*1000) / 1000
}

// Done returns the custom_ids already in the results file at path, so a
// resumed batch skips them. Only newline-terminated lines count: a torn last
// line (the process died mid-write) is ignored, and its request runs again.
// A missing file means nothing is done yet. Every custom_id counts, error
// results included: the caller should skip every request whose CustomID is
// in the map, so a rerun never writes a second line for it.
func Done(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("batch: resume: %w", err)
	}
	defer f.Close()
	done, _, err := scanDone(f, path)
	return done, err
}

// scanDone reads complete result lines; end is the offset just past the last
// newline (where a torn tail begins).
func scanDone(r io.Reader, name string) (done map[string]bool, end int64, err error) {
	done = map[string]bool{}
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		data, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return done, end, nil // data, if any, is the torn tail
		}
		if err != nil {
			return nil, end, fmt.Errorf("batch: read %s: line %d: %w", name, line, err)
		}
		end += int64(len(data))
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		var res struct {
			CustomID *string `json:"custom_id"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, end, fmt.Errorf("%w: %s:%d: not a result line: %s", ErrCorrupt, name, line, jsonErrText(err))
		}
		if res.CustomID == nil {
			return nil, end, fmt.Errorf("%w: %s:%d: result has no custom_id", ErrCorrupt, name, line)
		}
		done[*res.CustomID] = true
	}
}

// Resume prepares the results file at path for a (re)started batch: it reads
// the done custom_ids (see Done), cuts off a torn last line so new results
// start on a line of their own, and opens the file for appending, creating it
// if needed. The caller closes f.
func Resume(path string) (done map[string]bool, f *os.File, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("batch: resume: %w", err)
	}
	done, end, err := scanDone(f, path)
	if err == nil {
		err = f.Truncate(end)
	}
	if err == nil {
		_, err = f.Seek(end, io.SeekStart)
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("batch: resume %s: %w", path, err)
		}
		return nil, nil, err
	}
	return done, f, nil
}
