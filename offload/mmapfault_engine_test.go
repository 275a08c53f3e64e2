package offload_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
)

// Issue 10, faults: a model file truncated under the mmap tier while the
// engine runs used to kill the process with SIGBUS. Now the requests whose
// pass touched the lost pages fail with an error naming the file, the tensor
// and the offset, the process goes on, and once the file is whole again the
// other requests complete with the right text.
func TestMmapTruncatedFailsRequests(t *testing.T) {
	path := sixLayers(t)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref := enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.RAM, Threads: 2})
	_, wantTexts := allLogits(t, ref, 1)
	l := enginetest.Load(t, model.LoadOptions{Path: path, Tier: offload.Mmap, Threads: 2})
	e := enginetest.Engine(t, l, enginetest.Pipeline(t, 0, 3, 3, 12))
	bad, _ := l.Store.Lookup("blk.3.ffn_up.weight")

	// Cut the file in the middle of a layer's matrix: the pages past the
	// new end are gone from the mapping.
	cut := (bad.Offset + bad.Size/2) &^ 4095
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Lily and Tom", "The cat sat on the mat.", ""}
	var wg sync.WaitGroup
	errs := make([]error, len(prompts))
	for i, pr := range prompts {
		wg.Go(func() {
			r, err := e.Complete(t.Context(), sluice.Request{ID: fmt.Sprint(i), Prompt: pr})
			if err == nil {
				err = r.Err
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Fatalf("request %d ran on a truncated mapped file", i)
		}
		for _, w := range []string{path, "memory fault", "blk.", "at file offset"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("request %d: error %q does not name %q", i, err, w)
			}
		}
	}
	t.Log(errs[0])

	// The file whole again: requests complete, with the right text.
	if err := os.WriteFile(path, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pr := range prompts {
		r, err := e.Complete(t.Context(), sluice.Request{Prompt: pr})
		if err != nil || r.Err != nil {
			t.Fatalf("%q after the file was restored: %v %v", pr, err, r.Err)
		}
		if r.Text != wantTexts[pr] {
			t.Errorf("%q after the fault: %q, want %q", pr, r.Text, wantTexts[pr])
		}
	}
}
