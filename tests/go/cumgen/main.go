// cumgen writes two successive heap and mutex profiles of one process,
// prev then cur, with work between them, for the tests of cumulative
// profiles made deltas (ingest/pset_delta.c, POST /ingest's prev_profile):
//
//	cumgen -out DIR    writes heap-prev.pb.gz, heap-cur.pb.gz,
//	                   mutex-prev.pb.gz, mutex-cur.pb.gz
//
// Between the two: allocA and lockA go on, allocB and lockB start, so the
// deltas hold stacks that grew, stacks that are new and stacks that did
// not change (dropped).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
)

var sink [][]byte

//go:noinline
func allocA(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, make([]byte, 1024))
	}
}

//go:noinline
func allocB(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, make([]byte, 4096))
	}
}

//go:noinline
func allocOnce(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, make([]byte, 2048))
	}
}

var mu sync.Mutex

//go:noinline
func contend(rounds int) {
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				mu.Lock()
				x := 0
				for j := 0; j < 2000; j++ {
					x += j
				}
				_ = x
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

//go:noinline
func lockA(rounds int) { contend(rounds) }

//go:noinline
func lockB(rounds int) { contend(rounds) }

func write(dir, name, profile string) {
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = pprof.Lookup(profile).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cumgen:", err)
		os.Exit(1)
	}
}

func main() {
	out := flag.String("out", "", "directory to write the profiles into")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: cumgen -out DIR")
		os.Exit(2)
	}
	runtime.MemProfileRate = 4096
	runtime.SetMutexProfileFraction(1)
	allocA(2000)
	allocOnce(2000)
	lockA(300)
	runtime.GC()
	write(*out, "heap-prev.pb.gz", "heap")
	write(*out, "mutex-prev.pb.gz", "mutex")
	allocA(3000)
	allocB(1000)
	lockA(300)
	lockB(300)
	runtime.GC()
	write(*out, "heap-cur.pb.gz", "heap")
	write(*out, "mutex-cur.pb.gz", "mutex")
	runtime.KeepAlive(sink)
}
