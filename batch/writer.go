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
	"path/filepath"
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
	return w.WriteLine(r.CustomID, r)
}

// WriteLine appends v, any JSON object with a top-level "custom_id" (an
// OpenAIResult, say), as one line; id names it in errors.
func (w *Writer) WriteLine(id string, v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	if err := w.enc.Encode(v); err != nil { // Encode appends the newline
		return fmt.Errorf("batch: encode result %q: %w", id, err)
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
		return fmt.Errorf("batch: write result %q: %w", id, err)
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
	sc, err := scanDone(f, path, nil)
	return sc.done, err
}

type scan struct {
	done map[string]bool
	errs int   // error lines among them
	end  int64 // offset just past the last newline (where a torn tail begins)
}

// scanDone reads complete result lines. keep, when set, sees every complete
// line and whether it is an error line.
func scanDone(r io.Reader, name string, keep func(line []byte, isErr bool) error) (scan, error) {
	sc := scan{done: map[string]bool{}}
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		data, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return sc, nil // data, if any, is the torn tail
		}
		if err != nil {
			return scan{}, fmt.Errorf("batch: read %s: line %d: %w", name, line, err)
		}
		sc.end += int64(len(data))
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		id, isErr, err := resultLine(data)
		if err != nil {
			return scan{}, fmt.Errorf("%w: %s:%d: %s", ErrCorrupt, name, line, err)
		}
		sc.done[id] = true
		if isErr {
			sc.errs++
		}
		if keep != nil {
			if err := keep(data, isErr); err != nil {
				return scan{}, err
			}
		}
	}
}

// resultLine reads the custom_id of a result line, in either output format,
// and whether it records a failure: a non-empty "error" (a string in
// sluice's format, an object in OpenAI's) or a response status other than
// 200.
func resultLine(data []byte) (id string, isErr bool, err error) {
	var res struct {
		CustomID *string         `json:"custom_id"`
		Error    json.RawMessage `json:"error"`
		Response *struct {
			StatusCode int `json:"status_code"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return "", false, fmt.Errorf("not a result line: %s", jsonErrText(err))
	}
	if res.CustomID == nil {
		return "", false, errors.New("result has no custom_id")
	}
	e := bytes.TrimSpace(res.Error)
	isErr = len(e) > 0 && !bytes.Equal(e, []byte("null")) && !bytes.Equal(e, []byte(`""`))
	if res.Response != nil && res.Response.StatusCode != 0 && res.Response.StatusCode != 200 {
		isErr = true
	}
	return *res.CustomID, isErr, nil
}

// ResumeOptions say how a results file is reopened.
type ResumeOptions struct {
	// RetryErrors removes the error lines first, so their requests run
	// again; otherwise an error line counts as done like any other.
	RetryErrors bool
}

// Results is a results file opened for a (re)started batch.
type Results struct {
	// File is open for appending and locked (flock) until closed: a second
	// batch writing the same file is refused with ErrLocked.
	File *os.File
	// Done holds the custom_ids that have a line, to skip.
	Done map[string]bool
	// Errors counts the error lines among them; Retried, the error lines
	// removed by RetryErrors (their ids are not in Done).
	Errors, Retried int
}

// Close closes (and so unlocks) the file.
func (r *Results) Close() error { return r.File.Close() }

// Resume is OpenResults without options, returning the done custom_ids and
// the file.
func Resume(path string) (done map[string]bool, f *os.File, err error) {
	r, err := OpenResults(path, ResumeOptions{})
	if err != nil {
		return nil, nil, err
	}
	return r.Done, r.File, nil
}

// OpenResults prepares the results file at path for a (re)started batch: it
// takes an exclusive lock on it (refusing, with ErrLocked, a file another
// batch is writing), reads the done custom_ids (see Done), cuts off a torn
// last line so new results start on a line of their own, and leaves the file
// open for appending, creating it if needed. With RetryErrors the file is
// first rewritten without its error lines: into a new file beside it,
// synced and renamed over the old one, so a kill at any moment leaves either
// the old file or the new one.
func OpenResults(path string, o ResumeOptions) (*Results, error) {
	f, err := openLocked(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Results, error) {
		f.Close()
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("batch: resume %s: %w", path, err)
		}
		return nil, err
	}
	sc, err := scanDone(f, path, nil)
	if err != nil {
		return fail(err)
	}
	res := &Results{Done: sc.done, Errors: sc.errs}
	if o.RetryErrors && sc.errs > 0 {
		nf, sc2, err := withoutErrors(f, path)
		if err != nil {
			return fail(err)
		}
		f.Close()
		f = nf
		res.Done, res.Errors, res.Retried = sc2.done, 0, sc.errs
		for id := range sc.done {
			if !sc2.done[id] {
				delete(res.Done, id)
			}
		}
		sc.end = sc2.end
	}
	if err := f.Truncate(sc.end); err != nil {
		return fail(err)
	}
	if _, err := f.Seek(sc.end, io.SeekStart); err != nil {
		return fail(err)
	}
	res.File = f
	return res, nil
}

// withoutErrors copies the complete non-error lines of f into a new locked
// file and renames it over path.
func withoutErrors(f *os.File, path string) (*os.File, scan, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, scan{}, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, base+".retry-*")
	if err != nil {
		return nil, scan{}, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := lock(tmp); err != nil {
		return nil, scan{}, err
	}
	bw := bufio.NewWriterSize(tmp, 64<<10)
	var kept scan
	kept.done = map[string]bool{}
	if _, err := scanDone(f, path, func(line []byte, isErr bool) error {
		if isErr {
			return nil
		}
		id, _, _ := resultLine(line)
		kept.done[id] = true
		kept.end += int64(len(line))
		_, err := bw.Write(line)
		return err
	}); err != nil {
		return nil, scan{}, err
	}
	if err := bw.Flush(); err != nil {
		return nil, scan{}, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, scan{}, err
	}
	if fi, err := f.Stat(); err == nil {
		tmp.Chmod(fi.Mode().Perm())
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, scan{}, err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	ok = true
	return tmp, kept, nil
}

// openLocked opens path and takes an exclusive, non-blocking lock on it. A
// lock won on a file that was meanwhile renamed over (a retry by another
// process) is dropped and taken again on the file now at path.
func openLocked(path string, flag int) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(path, flag, 0o644)
		if err != nil {
			return nil, fmt.Errorf("batch: resume: %w", err)
		}
		if err := lock(f); err != nil {
			f.Close()
			if errors.Is(err, ErrLocked) {
				return nil, fmt.Errorf("%w: %s is being written by another batch (it holds the lock); wait for it to end, or write to another file", ErrLocked, path)
			}
			return nil, fmt.Errorf("batch: lock %s: %w", path, err)
		}
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("batch: lock %s: the file keeps being replaced", path)
}
