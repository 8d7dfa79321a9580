// profgen: a small Go program that does varied work and writes real
// runtime/pprof profiles for Ember's tests and benchmarks.
//
//	profgen -out DIR [-cpu 1s] [-n 1] [-seed 1]
//	profgen DIR              (same as -out DIR)
//
// It writes into DIR: cpu.pb.gz (a CPU profile over -cpu of work; with
// -n N > 1, N successive profiles cpu-0001.pb.gz ... instead), heap.pb.gz
// (MemProfileRate 4096, so many samples), mutex.pb.gz, block.pb.gz and
// goroutine.pb.gz. The work: recursion, small inlinable helpers, maps,
// sorting, string building, allocation, a contended mutex and a
// channel-blocked pipeline, each under pprof.Do with a "worker" label so
// samples carry string labels. The work is the same for a given -seed; what
// the sampler catches is not (it is time-based).
//
// Build without modules: GO111MODULE=off go build -o profgen main.go
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"
)

var (
	sink    []interface{} // keeps allocations alive for the inuse_* samples
	sinkMu  sync.Mutex
	shared  sync.Mutex // the contended mutex
	counter int
)

func init() {
	// Set before anything allocates so the heap profile sees everything.
	runtime.MemProfileRate = 4096
}

// Small helpers the compiler inlines: their frames show up as extra lines
// of one location (innermost first).
func mix(a, b uint64) uint64 { return (a ^ b) * 0x9e3779b97f4a7c15 }
func sq(x int) int           { return x * x }

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

type node struct {
	left, right *node
	val         int
}

func build(depth int, r *rand.Rand) *node {
	if depth == 0 {
		return nil
	}
	return &node{build(depth-1, r), build(depth-1, r), r.Intn(1000)}
}

func (n *node) sum() int {
	if n == nil {
		return 0
	}
	return n.val + n.left.sum() + n.right.sum()
}

func hashWork(r *rand.Rand) uint64 {
	h := uint64(r.Int63())
	for i := 0; i < 20000; i++ {
		h = mix(h, uint64(sq(i|3)))
	}
	return h
}

func mapWork(r *rand.Rand) int {
	m := make(map[string]int)
	for i := 0; i < 2000; i++ {
		m[fmt.Sprintf("k%d", r.Intn(500))]++
	}
	return len(m)
}

func sortWork(r *rand.Rand) int {
	xs := make([]int, 5000)
	for i := range xs {
		xs[i] = r.Int()
	}
	sort.Ints(xs)
	return xs[0]
}

func stringWork(r *rand.Rand) int {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString("frame;")
		b.WriteByte(byte('a' + r.Intn(26)))
	}
	return len(strings.Split(b.String(), ";"))
}

func allocWork(r *rand.Rand) {
	keep := make([][]byte, 0, 64)
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 512+r.Intn(8192)))
	}
	sinkMu.Lock()
	if len(sink) > 2000 {
		sink = sink[:0]
	}
	sink = append(sink, keep, build(6, r))
	sinkMu.Unlock()
}

// contend has three goroutines take turns on one mutex, holding it while
// they work, so the mutex profile records contention.
func contend(rounds int) {
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				shared.Lock()
				counter += fib(12)
				shared.Unlock()
			}
		}()
	}
	wg.Wait()
}

// contendSure makes contention until the mutex profile holds some, however
// the scheduler ran contend's goroutines on a loaded machine (it once
// wrote an empty mutex profile): a waiter is started on the held mutex,
// given time to reach Lock, and let in.
func contendSure() {
	for i := 0; i < 10000 && pprof.Lookup("mutex").Count() == 0; i++ {
		shared.Lock()
		waiting := make(chan struct{})
		done := make(chan struct{})
		go func() {
			close(waiting)
			shared.Lock()
			counter++
			shared.Unlock()
			close(done)
		}()
		<-waiting
		time.Sleep(200 * time.Microsecond) // the waiter reaches Lock
		shared.Unlock()
		<-done
	}
}

func pipeline(n int) int {
	ch := make(chan int) // unbuffered: both ends block
	go func() {
		for i := 0; i < n; i++ {
			ch <- i
		}
		close(ch)
	}()
	total := 0
	for v := range ch {
		time.Sleep(20 * time.Microsecond)
		total += v
	}
	return total
}

// labeled runs FN under the worker label NAME, as pprof.Do does in services.
func labeled(name string, fn func()) {
	pprof.Do(context.Background(), pprof.Labels("worker", name), func(context.Context) { fn() })
}

// work runs every kind of work in parallel until DEADLINE.
func work(seed int64, deadline time.Time) {
	var wg sync.WaitGroup
	kinds := []struct {
		name string
		fn   func(r *rand.Rand)
	}{
		{"hash", func(r *rand.Rand) { _ = hashWork(r) + uint64(fib(22)) }},
		{"tree", func(r *rand.Rand) { _ = build(12, r).sum() + mapWork(r) }},
		{"sort", func(r *rand.Rand) { _ = sortWork(r) + stringWork(r) }},
		{"alloc", func(r *rand.Rand) { allocWork(r) }},
		{"lock", func(r *rand.Rand) { contend(200) }},
		{"pipe", func(r *rand.Rand) { _ = pipeline(50) }},
	}
	for i, k := range kinds {
		wg.Add(1)
		go func(i int, name string, fn func(r *rand.Rand)) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed + int64(i)))
			labeled(name, func() {
				for time.Now().Before(deadline) {
					fn(r)
				}
			})
		}(i, k.name, k.fn)
	}
	wg.Wait()
}

// write creates DIR/NAME and lets FN fill it; any error ends the program.
func write(dir, name string, fn func(f *os.File) error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = fn(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profgen:", err)
		os.Exit(1)
	}
}

func lookup(name string) func(f *os.File) error {
	return func(f *os.File) error { return pprof.Lookup(name).WriteTo(f, 0) }
}

func main() {
	out := flag.String("out", "", "directory to write the profiles into")
	cpu := flag.Duration("cpu", time.Second, "work (and CPU profile) duration")
	n := flag.Int("n", 1, "CPU profiles to write (cpu-0001.pb.gz ... when > 1)")
	seed := flag.Int64("seed", 1, "seed of the work's random numbers")
	flag.Parse()
	if *out == "" && flag.NArg() == 1 {
		*out = flag.Arg(0)
	}
	if *out == "" || *n < 1 || flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "usage: profgen -out DIR [-cpu 1s] [-n N] [-seed S]")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profgen:", err)
		os.Exit(1)
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	for i := 1; i <= *n; i++ {
		name := "cpu.pb.gz"
		if *n > 1 {
			name = fmt.Sprintf("cpu-%04d.pb.gz", i)
		}
		write(*out, name, func(f *os.File) error {
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			work(*seed+int64(i), time.Now().Add(*cpu))
			pprof.StopCPUProfile()
			return nil
		})
	}
	// Park labeled goroutines so the goroutine profile has labeled stacks.
	park := make(chan struct{})
	var parked sync.WaitGroup
	for _, w := range []string{"idle-a", "idle-b"} {
		parked.Add(1)
		go labeled(w, func() { parked.Done(); <-park })
	}
	parked.Wait()
	contendSure()
	runtime.GC() // so inuse_* reflect the last collection
	write(*out, "heap.pb.gz", lookup("heap"))
	write(*out, "mutex.pb.gz", lookup("mutex"))
	write(*out, "block.pb.gz", lookup("block"))
	write(*out, "goroutine.pb.gz", lookup("goroutine"))
	close(park)
	runtime.KeepAlive(sink)
}
