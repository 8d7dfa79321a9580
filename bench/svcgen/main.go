// svcgen: a small Go "service" for Ember's storage benchmark (issue 15):
// it runs the workload of one of three services on real standard-library
// code (so its stacks are a real program's: net/http, encoding/json,
// compress/gzip, regexp, html/template, sort, ...) and writes a CPU and a
// heap profile every -every, as a continuous profiler scrapes a service.
//
//	svcgen -name api|ingest|search -out DIR [-for 10m] [-every 10s]
//	       [-seed 1] [-memrate 65536] [-idle 2ms]
//
// DIR gets cpu-NNNN.pb.gz (the CPU profile of each period, back to back)
// and heap-NNNN.pb.gz (the heap profile at the end of each period), each
// written under a temporary name and renamed. The services:
//
//	api     an HTTP server on loopback and its clients: JSON in and out,
//	        a template page, a regexp search over a text; pprof label
//	        "endpoint" per handler.
//	ingest  a pipeline of records: CSV encode, gzip, SHA-256, gunzip, CSV
//	        parse, strconv, base64; label "stage" per step.
//	search  an inverted index over generated documents: tokenizing, map
//	        updates, scoring with a top-k heap, sorting; label "op".
//
// Each worker sleeps -idle between units of work so three services share
// a small machine; the work for a given -seed is the same, what the
// sampler catches is not (it is time-based).
//
// Build without modules: GO111MODULE=off go build -o svcgen main.go
package main

import (
	"bytes"
	"compress/gzip"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel
india juliet kilo lima mike november oscar papa quebec romeo sierra tango
uniform victor whiskey xray yankee zulu storage profile block chunk stack
frame sample series label query merge focus index cache commit snapshot`)

// sentence makes N random words.
func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.Intn(len(words))])
	}
	return b.String()
}

// labeled runs FN under the pprof label KEY=VALUE, as services do.
func labeled(key, value string, fn func()) {
	pprof.Do(context.Background(), pprof.Labels(key, value), func(context.Context) { fn() })
}

// ---- api: an HTTP service and its clients ------------------------------------

type user struct {
	ID      int               `json:"id"`
	Name    string            `json:"name"`
	Email   string            `json:"email"`
	Tags    []string          `json:"tags"`
	Scores  []float64         `json:"scores"`
	Profile map[string]string `json:"profile"`
}

var page = template.Must(template.New("page").Parse(`<html><body><h1>{{.Title}}</h1>
<ul>{{range .Users}}<li>{{.Name}} &lt;{{.Email}}&gt; {{range .Tags}}<b>{{.}}</b>{{end}}</li>
{{end}}</ul></body></html>`))

func makeUsers(r *rand.Rand, n int) []user {
	us := make([]user, n)
	for i := range us {
		us[i] = user{ID: r.Intn(1e6), Name: sentence(r, 2), Email: words[r.Intn(len(words))] + "@example.com",
			Tags: strings.Fields(sentence(r, 4)), Scores: []float64{r.Float64(), r.Float64()},
			Profile: map[string]string{"city": sentence(r, 1), "bio": sentence(r, 12)}}
	}
	return us
}

func apiHandlers(seed int64) *http.ServeMux {
	mux := http.NewServeMux()
	text := sentence(rand.New(rand.NewSource(seed)), 4000)
	mux.HandleFunc("/users", func(w http.ResponseWriter, req *http.Request) {
		labeled("endpoint", "users", func() {
			r := rand.New(rand.NewSource(time.Now().UnixNano()))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(makeUsers(r, 40))
		})
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, req *http.Request) {
		labeled("endpoint", "page", func() {
			r := rand.New(rand.NewSource(time.Now().UnixNano()))
			_ = page.Execute(w, map[string]interface{}{"Title": sentence(r, 3), "Users": makeUsers(r, 25)})
		})
	})
	mux.HandleFunc("/search", func(w http.ResponseWriter, req *http.Request) {
		labeled("endpoint", "search", func() {
			re, err := regexp.Compile(`\b(` + req.URL.Query().Get("q") + `)\w*\s+\w+`)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			fmt.Fprintln(w, len(re.FindAllStringIndex(text, -1)))
		})
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, req *http.Request) {
		labeled("endpoint", "upload", func() {
			var us []user
			if err := json.NewDecoder(req.Body).Decode(&us); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			sort.Slice(us, func(i, j int) bool { return us[i].Name < us[j].Name })
			fmt.Fprintln(w, len(us))
		})
	})
	return mux
}

// apiClient calls the endpoints in turn until DEADLINE.
func apiClient(base string, seed int64, idle time.Duration, deadline time.Time) {
	r := rand.New(rand.NewSource(seed))
	c := &http.Client{Timeout: 10 * time.Second}
	for i := 0; time.Now().Before(deadline); i++ {
		var resp *http.Response
		var err error
		switch i % 4 {
		case 0:
			resp, err = c.Get(base + "/users")
		case 1:
			resp, err = c.Get(base + "/page")
		case 2:
			resp, err = c.Get(base + "/search?q=" + words[r.Intn(len(words))])
		default:
			body, _ := json.Marshal(makeUsers(r, 30))
			resp, err = c.Post(base+"/upload", "application/json", bytes.NewReader(body))
		}
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(idle)
	}
}

func runAPI(seed int64, idle time.Duration, deadline time.Time) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	go func() { _ = http.Serve(ln, apiHandlers(seed)) }()
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			apiClient("http://"+ln.Addr().String(), seed+int64(k), idle, deadline)
		}(k)
	}
	wg.Wait()
}

// ---- ingest: a record pipeline ----------------------------------------------

func encodeCSV(r *rand.Rand, n int) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for i := 0; i < n; i++ {
		_ = w.Write([]string{strconv.Itoa(r.Intn(1e9)), sentence(r, 3),
			strconv.FormatFloat(r.NormFloat64()*100, 'f', 4, 64), time.Now().Format(time.RFC3339Nano)})
	}
	w.Flush()
	return b.Bytes()
}

func compress(p []byte) []byte {
	var b bytes.Buffer
	z, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	_, _ = z.Write(p)
	_ = z.Close()
	return b.Bytes()
}

func decompress(p []byte) []byte {
	z, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		fail(err)
	}
	out, _ := io.ReadAll(z)
	return out
}

func parseCSV(p []byte) float64 {
	recs, _ := csv.NewReader(bytes.NewReader(p)).ReadAll()
	sum := 0.0
	for _, rec := range recs {
		v, _ := strconv.ParseFloat(rec[2], 64)
		sum += v
		if _, err := time.Parse(time.RFC3339Nano, rec[3]); err != nil {
			fail(err)
		}
	}
	return sum
}

func ingestOnce(r *rand.Rand) {
	var raw, packed []byte
	labeled("stage", "encode", func() { raw = encodeCSV(r, 400) })
	labeled("stage", "compress", func() { packed = compress(raw) })
	labeled("stage", "checksum", func() {
		h := sha256.Sum256(packed)
		_ = base64.StdEncoding.EncodeToString(h[:])
	})
	labeled("stage", "decode", func() { _ = parseCSV(decompress(packed)) })
}

func runIngest(seed int64, idle time.Duration, deadline time.Time) {
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed + int64(k)))
			for time.Now().Before(deadline) {
				ingestOnce(r)
				time.Sleep(idle)
			}
		}(k)
	}
	wg.Wait()
}

// ---- search: an inverted index --------------------------------------------------

type hit struct {
	doc   int
	score float64
}
type hits []hit

func (h hits) Len() int            { return len(h) }
func (h hits) Less(i, j int) bool  { return h[i].score < h[j].score }
func (h hits) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *hits) Push(x interface{}) { *h = append(*h, x.(hit)) }
func (h *hits) Pop() interface{} {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type index struct {
	mu    sync.RWMutex
	post  map[string]map[int]int
	ndocs int
}

func (ix *index) add(doc string) {
	terms := strings.Fields(strings.ToLower(doc))
	ix.mu.Lock()
	id := ix.ndocs
	ix.ndocs++
	for _, t := range terms {
		m := ix.post[t]
		if m == nil {
			m = make(map[int]int)
			ix.post[t] = m
		}
		m[id]++
	}
	if ix.ndocs%20000 == 0 { // a service keeps a bounded index
		ix.post = make(map[string]map[int]int)
	}
	ix.mu.Unlock()
}

func (ix *index) query(q []string, k int) []hit {
	scores := make(map[int]float64)
	ix.mu.RLock()
	for _, t := range q {
		m := ix.post[t]
		idf := math.Log(float64(ix.ndocs+1) / float64(len(m)+1))
		for d, tf := range m {
			scores[d] += float64(tf) * idf
		}
	}
	ix.mu.RUnlock()
	h := &hits{}
	for d, s := range scores {
		heap.Push(h, hit{d, s})
		if h.Len() > k {
			heap.Pop(h)
		}
	}
	out := []hit(*h)
	sort.Slice(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out
}

func runSearch(seed int64, idle time.Duration, deadline time.Time) {
	ix := &index{post: make(map[string]map[int]int)}
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed + int64(k)))
			for time.Now().Before(deadline) {
				if k == 0 {
					labeled("op", "index", func() {
						for i := 0; i < 50; i++ {
							ix.add(sentence(r, 40))
						}
					})
				} else {
					labeled("op", "query", func() { _ = ix.query(strings.Fields(sentence(r, 3)), 10) })
				}
				time.Sleep(idle)
			}
		}(k)
	}
	wg.Wait()
}

// ---- profiles --------------------------------------------------------------------

func fail(err error) {
	fmt.Fprintln(os.Stderr, "svcgen:", err)
	os.Exit(1)
}

// write fills DIR/NAME through FN, via a temporary name.
func write(dir, name string, fn func(f *os.File) error) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.Create(tmp)
	if err == nil {
		err = fn(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		fail(err)
	}
}

// profile writes a CPU profile per period back to back, and a heap profile
// at the end of each, until END.
func profile(dir string, every time.Duration, end time.Time) {
	for i := 1; time.Now().Before(end); i++ {
		var cpu bytes.Buffer
		if err := pprof.StartCPUProfile(&cpu); err != nil {
			fail(err)
		}
		time.Sleep(every)
		pprof.StopCPUProfile()
		write(dir, fmt.Sprintf("cpu-%04d.pb.gz", i), func(f *os.File) error {
			_, err := f.Write(cpu.Bytes())
			return err
		})
		write(dir, fmt.Sprintf("heap-%04d.pb.gz", i), func(f *os.File) error {
			return pprof.Lookup("heap").WriteTo(f, 0)
		})
	}
}

func main() {
	name := flag.String("name", "", "the service: api, ingest or search")
	out := flag.String("out", "", "directory to write the profiles into")
	dur := flag.Duration("for", 10*time.Minute, "how long to run")
	every := flag.Duration("every", 10*time.Second, "profile period")
	seed := flag.Int64("seed", 1, "seed of the work's random numbers")
	memrate := flag.Int("memrate", 64*1024, "runtime.MemProfileRate (bytes)")
	idle := flag.Duration("idle", 2*time.Millisecond, "pause between units of work")
	flag.Parse()
	run := map[string]func(int64, time.Duration, time.Time){"api": runAPI, "ingest": runIngest,
		"search": runSearch}[*name]
	if run == nil || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: svcgen -name api|ingest|search -out DIR [-for D] [-every D] [-seed S] [-memrate N] [-idle D]")
		os.Exit(2)
	}
	runtime.MemProfileRate = *memrate // before the work allocates
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	end := time.Now().Add(*dur)
	go run(*seed, *idle, end.Add(time.Minute))
	profile(*out, *every, end)
}
