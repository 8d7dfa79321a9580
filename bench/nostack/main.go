// nostack: copies a corpus of gzip'd pprof files and gzip'd perf script
// text, leaving out the samples that have an empty stack, for Ember's
// storage benchmark (issue 15).
//
//	nostack SRC DST
//
// Every *.pb.gz under SRC is written to the same path under DST without
// its location-less samples, every *.txt.gz without its events that have
// no call chain; other files are copied as they are. Go's CPU profiles
// and perf both hold a few such samples (the sampled thread had no frame
// to unwind), which `ember import` stores and `ember compact` refused at
// the time of writing ("block builder: an empty stack"): bench/compact.sh
// measures on a copy without them only when compaction fails on the
// corpus as it is, and says how many it left out. Prints that count
// (pprof samples plus perf events).
//
// The pprof message is walked at the wire level (field 2 of Profile is a
// Sample, field 1 of Sample its location ids, packed or not); every other
// byte is copied unchanged. In perf script text an event is a header line,
// then its frames (lines starting with a tab), then a blank line.
//
// Build without modules: GO111MODULE=off go build -o nostack main.go
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

var errBad = errors.New("not a pprof message")

// field reads one field at P: its number, the whole field's length, and
// for a length-delimited field where its payload starts.
func field(p []byte) (num uint64, n int, body int, err error) {
	tag, k := binary.Uvarint(p)
	if k <= 0 {
		return 0, 0, 0, errBad
	}
	switch tag & 7 {
	case 0:
		_, m := binary.Uvarint(p[k:])
		if m <= 0 {
			return 0, 0, 0, errBad
		}
		return tag >> 3, k + m, 0, nil
	case 1:
		return tag >> 3, k + 8, 0, nil
	case 5:
		return tag >> 3, k + 4, 0, nil
	case 2:
		l, m := binary.Uvarint(p[k:])
		if m <= 0 || l > uint64(len(p)-k-m) {
			return 0, 0, 0, errBad
		}
		return tag >> 3, k + m + int(l), k + m, nil
	}
	return 0, 0, 0, errBad
}

// hasLocation says whether the Sample message S names a location.
func hasLocation(s []byte) (bool, error) {
	for len(s) > 0 {
		num, n, body, err := field(s)
		if err != nil || n > len(s) {
			return false, errBad
		}
		if num == 1 && (body == 0 || n > body) {
			return true, nil
		}
		s = s[n:]
	}
	return false, nil
}

// stripPerf returns perf script text P without its events that have no
// frame: a header line (not a comment, not a frame) followed by a blank
// line, another header or the end.
func stripPerf(p []byte) ([]byte, int) {
	lines := bytes.SplitAfter(p, []byte("\n"))
	var out bytes.Buffer
	dropped := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		header := len(bytes.TrimSpace(l)) > 0 && l[0] != '#' && l[0] != '\t'
		if header && (i+1 == len(lines) || len(lines[i+1]) == 0 || lines[i+1][0] != '\t') {
			dropped++
			if i+1 < len(lines) && len(bytes.TrimSpace(lines[i+1])) == 0 {
				i++ // its blank line
			}
			continue
		}
		out.Write(l)
	}
	return out.Bytes(), dropped
}

// strip returns the Profile message P without its location-less samples.
func strip(p []byte) ([]byte, int, error) {
	var out bytes.Buffer
	dropped := 0
	for len(p) > 0 {
		num, n, body, err := field(p)
		if err != nil || n > len(p) {
			return nil, 0, errBad
		}
		if num == 2 && body > 0 {
			ok, err := hasLocation(p[body:n])
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				dropped++
				p = p[n:]
				continue
			}
		}
		out.Write(p[:n])
		p = p[n:]
	}
	return out.Bytes(), dropped, nil
}

func copyFile(src, dst string) (int, error) {
	in, err := os.ReadFile(src)
	if err != nil {
		return 0, err
	}
	dropped := 0
	pb, txt := strings.HasSuffix(src, ".pb.gz"), strings.HasSuffix(src, ".txt.gz")
	if pb || txt {
		z, err := gzip.NewReader(bytes.NewReader(in))
		if err != nil {
			return 0, err
		}
		raw, err := io.ReadAll(z)
		if err != nil {
			return 0, err
		}
		if txt {
			raw, dropped = stripPerf(raw)
		} else if raw, dropped, err = strip(raw); err != nil {
			return 0, fmt.Errorf("%s: %v", src, err)
		}
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(raw)
		w.Close()
		in = b.Bytes()
	}
	return dropped, os.WriteFile(dst, in, 0o644)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: nostack SRC DST")
		os.Exit(2)
	}
	src, dst := os.Args[1], os.Args[2]
	total := 0
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		n, err := copyFile(path, filepath.Join(dst, rel))
		total += n
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nostack:", err)
		os.Exit(1)
	}
	fmt.Println(total)
}
