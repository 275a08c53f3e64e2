// Command streamread measures streaming-read memory bandwidth: T goroutines
// each sum their own contiguous share of a buffer much larger than the last
// level cache, the access pattern of a decode step reading every weight once.
// bench/run.mjs divides "model bytes × decode tok/s" by this figure.
//
// It lives under an underscore directory so the root module's ./... (and so
// CI) never builds it; run it with `go run ./bench/_streamread -threads 2`.
// It prints one JSON object: {"threads":T,"bytes":N,"gb_s":best,"passes":[...]}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	threads := flag.Int("threads", 1, "goroutines reading in parallel (each pinned to an OS thread)")
	mib := flag.Int("mib", 1024, "buffer size in MiB; make it far larger than the L3 cache")
	passes := flag.Int("passes", 5, "timed passes over the buffer; the best is reported")
	huge := flag.Bool("huge", true, "read anonymous memory advised MADV_HUGEPAGE, as sluice's RAM tier holds weights (false: the Go heap, 4 KiB pages)")
	flag.Parse()
	if *threads < 1 || *mib < 64 || *passes < 1 {
		fmt.Fprintln(os.Stderr, "streamread: want -threads ≥ 1, -mib ≥ 64, -passes ≥ 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), *threads))
	var buf []uint64
	if *huge {
		b, err := syscall.Mmap(-1, 0, *mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			fmt.Fprintln(os.Stderr, "streamread: mmap:", err)
			os.Exit(1)
		}
		_ = syscall.Madvise(b, 14) // MADV_HUGEPAGE
		buf = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
	} else {
		buf = make([]uint64, *mib<<20/8)
	}
	for i := range buf { // touch every page so the timed passes do not fault
		buf[i] = uint64(i)
	}
	n := len(buf)
	per := (n / *threads) &^ 7
	res := struct {
		Huge    bool      `json:"huge_pages"`
		Threads int       `json:"threads"`
		Bytes   int64     `json:"bytes"`
		GBs     float64   `json:"gb_s"`
		Passes  []float64 `json:"passes"`
		Sink    uint64    `json:"sink"`
	}{Huge: *huge, Threads: *threads, Bytes: int64(per) * int64(*threads) * 8}
	sums := make([]uint64, *threads*8) // one cache line per worker
	for range *passes + 1 {            // the first pass warms up and is not kept
		var wg sync.WaitGroup
		start := time.Now()
		for w := range *threads {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				sums[w*8] = sum(buf[w*per : (w+1)*per])
			})
		}
		wg.Wait()
		el := time.Since(start).Seconds()
		res.Passes = append(res.Passes, float64(res.Bytes)/el/1e9)
		for w := range *threads {
			res.Sink += sums[w*8]
		}
	}
	res.Passes = res.Passes[1:]
	for _, g := range res.Passes {
		res.GBs = max(res.GBs, g)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "streamread:", err)
		os.Exit(1)
	}
}

// sum adds the words of xs with eight independent accumulators, so the loop
// is bound by loads rather than by one add chain. len(xs) is a multiple of 8.
func sum(xs []uint64) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	for i := 0; i+8 <= len(xs); i += 8 {
		v := (*[8]uint64)(xs[i : i+8])
		a0 += v[0]
		a1 += v[1]
		a2 += v[2]
		a3 += v[3]
		a4 += v[4]
		a5 += v[5]
		a6 += v[6]
		a7 += v[7]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}
