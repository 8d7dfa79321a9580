// regexdiff: the oracle of Ember's differential regex test. Go's regexp
// package decides, as Prometheus does for a label matcher, whether
// regexp.MustCompile("^(?s:" + re + ")$").MatchString(s).
//
//	regexdiff [-seed 1] [-n 3000] [-subjects 12]   generate, then judge
//	regexdiff -judge < CASES                       judge given cases
//
// Cases are lines "p HEX" (a pattern) followed by lines "s HEX" (subjects
// for it), HEX being the bytes in hexadecimal. The output repeats each line
// with Go's verdict: "p HEX ok" or "p HEX err" (it does not compile), and
// "s HEX 1" or "s HEX 0" (matches or not). tests/unit/test_regex.c
// (--go-cases FILE) runs Ember's engine on the same lines and compares
// every verdict; tests/e2e/regex_go.sh drives both.
//
// The generator draws patterns from a grammar of RE2 syntax: literals
// (ASCII, Greek, other non-ASCII, newline), escapes (\x41, \x{263a}, octal,
// punctuation), \d \w \s, \pL \p{Greek} \PL \p{^Greek}, bracket
// expressions with ranges, POSIX and Unicode classes, ., ^ $ \A \z \b \B,
// groups (plain, (?:), named), flag groups ((?i) (?-s) (?m) (?U) (?i:...)),
// alternation and repetition {n,m} (greedy and lazy), plus a share of
// invalid forms that both engines must reject, and of L0.*L1.*...Ln shapes
// (Ember's memmem fast path) with and without (?-s). Each pattern gets a subject
// sampled from its own grammar (likely to match) and variants of it, and
// random subjects over an alphabet with newlines, case pairs, Greek, and
// invalid UTF-8. The same seed always gives the same cases.
//
// Build without modules: GO111MODULE=off go build -o regexdiff main.go
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strings"
)

type gen struct {
	r     *rand.Rand
	names int // named groups so far: names are unique (Go rejects repeats)
}

func (g *gen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

// Characters of subjects; the pattern grammar draws from the same pool.
var alphabet = []string{
	"a", "b", "c", "x", "k", "K", "s", "S", "A", "B", "0", "7", "_", "-",
	" ", "\n", "\n", "\t", ".", "\u017f", "\u212a", "\u03c3", "\u03a3",
	"\u03c2", "\u03b1", "\u0391", "\u03a9", "\u03c9", "\u00e9", "\u00c9",
	"\u263a", "\U0001F600", "\ufffd", "\xff", "\xc3", "\xe2\x82", "\u0300",
	"\u4e2d", "\u0660",
}

// A literal: its pattern text and a string it matches.
type lit struct{ pat, sample string }

var literals = []lit{
	{"a", "a"}, {"b", "b"}, {"c", "c"}, {"x", "x"}, {"k", "k"}, {"K", "K"},
	{"s", "s"}, {"S", "S"}, {"0", "0"}, {"_", "_"}, {"-", "-"}, {" ", " "},
	{"\n", "\n"}, {"\u03c3", "\u03c3"}, {"\u03a3", "\u03a3"},
	{"\u03c2", "\u03c2"}, {"\u03b1", "\u03b1"}, {"\u03a9", "\u03a9"},
	{"\u00e9", "\u00e9"}, {"\u00c9", "\u00c9"}, {"\u017f", "\u017f"},
	{"\u212a", "\u212a"}, {"\U0001F600", "\U0001F600"}, {"\ufffd", "\xff"},
	{`\x41`, "A"}, {`\x61`, "a"}, {`\x{263a}`, "\u263a"},
	{`\x{3c3}`, "\u03c3"}, {`\x{1F600}`, "\U0001F600"}, {`\x0a`, "\n"},
	{`\x{fffd}`, "\ufffd"}, {`\x{0041}`, "A"}, {`\x7f`, "\x7f"},
	{`\n`, "\n"}, {`\t`, "\t"}, {`\.`, "."}, {`\*`, "*"}, {`\\`, `\`},
	{`\-`, "-"}, {`\_`, "_"}, {`\ `, " "}, {`\{`, "{"}, {`\}`, "}"},
	{`\101`, "A"}, {`\0`, "\x00"}, {`\07`, "\a"}, {`\a`, "\a"}, {`\v`, "\v"},
	{`\f`, "\f"}, {`\r`, "\r"}, {`\#`, "#"}, {`\~`, "~"},
	{`\Qa.b\E`, "a.b"}, {`\Q*)\E`, "*)"}, {`\Q\E`, ""}, {`\Q\\E`, `\`},
	{"\\Q\u03c3\\E", "\u03c3"},
}

// Bracket expressions whose reading has rules of its own.
var oddBrackets = []lit{
	{"[]a]", "]"}, {"[^]a]", "b"}, {"[a-]", "-"}, {"[-a]", "-"}, {"[[]", "["},
	{"[[:alpha:]-z]", "-"}, {`[\d-z]`, "-"}, {"[a-c-e]", "-"},
	{"[--/]", "."}, {"[[:foo]", ":"}, {`[\[]`, "["}, {`[^\n]`, "\n"},
	{`[\x00-\x{10ffff}]`, "\n"}, {`[^\x00-\x7f]`, "\xff"},
	{`[^\x{fffd}]`, "\xff"}, {`[^\P{Greek}]`, "\u03c3"}, {`[\p{^L}]`, "7"},
}

// Classes outside brackets, each with a sample it matches.
var classes = []lit{
	{".", "a"}, {".", "\n"}, {".", "\u03c3"}, {`\d`, "7"}, {`\D`, "a"},
	{`\w`, "k"}, {`\W`, " "}, {`\s`, "\n"}, {`\S`, "\u03a3"},
	{`\pL`, "\u03b1"}, {`\PL`, "7"}, {`\p{Greek}`, "\u03a9"},
	{`\P{Greek}`, "a"}, {`\p{^Greek}`, "b"}, {`\P{^Greek}`, "\u03c2"},
	{`\pN`, "\u0660"}, {`\p{Lu}`, "K"}, {`\p{Ll}`, "\u017f"},
	{`\p{Any}`, "\xff"}, {`\pS`, "\ufffd"}, {`\p{Latin}`, "\u212a"},
	{`\p{Common}`, " "}, {`\p{Han}`, "\u4e2d"}, {`\p{Mn}`, "\u0300"},
	{`\p{Nd}`, "0"}, {`\pZ`, " "}, {`\p{Zs}`, " "}, {`\pP`, "."},
}

// Items inside brackets: single characters, ranges and classes.
var bracketItems = []lit{
	{"a", "a"}, {"b", "b"}, {"k", "k"}, {"S", "S"}, {"\u03c3", "\u03c3"},
	{"\u00e9", "\u00e9"}, {"a-c", "b"}, {"A-Z", "K"}, {"0-9", "7"},
	{"\u03b1-\u03c9", "\u03c2"}, {`\x{3b1}-\x{3c9}`, "\u03c3"},
	{`\x41-\x5a`, "S"}, {"\u0391-\u03a9", "\u03a3"}, {`\n`, "\n"},
	{`\d`, "0"}, {`\W`, "-"}, {`\s`, " "}, {`\S`, "x"}, {`\pL`, "\u00e9"},
	{`\p{Greek}`, "\u03c9"}, {`\PL`, "_"}, {`\P{Greek}`, "a"},
	{"[:alpha:]", "a"}, {"[:^alpha:]", "7"}, {"[:upper:]", "K"},
	{"[:word:]", "_"}, {"[:space:]", "\n"}, {"[:^space:]", "x"},
	{"[:punct:]", "-"}, {`\-`, "-"}, {`\]`, "]"}, {`\\`, `\`}, {".", "."},
	{"\ufffd", "\xff"}, {`\x{fffd}`, "\xff"}, {"\U0001F600", "\U0001F600"},
	{"\u017f", "\u017f"}, {"\u212a", "\u212a"}, {`\x00-\x{10ffff}`, "\xff"},
	{`\x{80}-\x{10ffff}`, "\u00e9"},
}

var flags = []string{
	"i", "-i", "s", "-s", "m", "-m", "U", "is", "i-s", "-is", "im", "ms-i",
	"", "sU", "-U", "s-m",
}

// Invalid forms: both engines must reject a pattern holding one.
var invalid = []string{
	"(", ")", "[", "[a", "*", "+a", "a**", "a{2}{3}", "{2}", `\q`, `\8`,
	`\1`, `\C`, `\pX`, `\p{Foo}`, `\p{greek}`, `\p`, `\P{`, `\x{}`,
	`\x{110000}`, `\xg1`, `\x4`, "(?z)", "(?-)", "(?i-)", "(?P<>x)",
	"(?P=n)", "(?P<n", "[z-a]", "[[:foo:]]", "[a-\\d]", "(?=a)", "a{1001}",
	"a{3,2}", "\\", "[]", "(?i", `\b*+`, "x{2}*", "[[:alpha:]-z]-\\",
	`\z\Z`, `[\b]`, `[\A]`, "(?<n>a)x(", "(?P<1a>x)(", `\Qab`, "a)(b",
	`[\Q]\E]`, `\p{^}`, `[\pL-z]`,
}

func (g *gen) literal() (string, string) {
	l := literals[g.r.Intn(len(literals))]
	return l.pat, l.sample
}

func (g *gen) bracket() (string, string) {
	var p strings.Builder
	p.WriteString("[")
	neg := g.r.Intn(4) == 0
	if neg {
		p.WriteString("^")
	}
	n := 1 + g.r.Intn(3)
	sample := ""
	for i := 0; i < n; i++ {
		it := bracketItems[g.r.Intn(len(bracketItems))]
		p.WriteString(it.pat)
		if sample == "" {
			sample = it.sample
		}
	}
	p.WriteString("]")
	if neg {
		sample = g.pick(alphabet)
	}
	return p.String(), sample
}

func (g *gen) atom(depth int) (string, string) {
	k := g.r.Intn(100)
	switch {
	case k < 35:
		return g.literal()
	case k < 55:
		c := classes[g.r.Intn(len(classes))]
		return c.pat, c.sample
	case k < 64:
		return g.bracket()
	case k < 68:
		b := oddBrackets[g.r.Intn(len(oddBrackets))]
		return b.pat, b.sample
	case k < 73:
		return g.pick([]string{"^", "$", `\A`, `\z`, `\b`, `\B`}), ""
	case depth <= 0:
		return g.literal()
	}
	inner, s := g.alt(depth - 1)
	switch g.r.Intn(6) {
	case 0:
		return "(?:" + inner + ")", s
	case 1:
		g.names++
		return fmt.Sprintf("(?P<n%d>%s)", g.names, inner), s
	case 2:
		return "(?" + g.pick(flags) + ":" + inner + ")", s
	default:
		return "(" + inner + ")", s
	}
}

var quants = []string{"*", "+", "?", "{2}", "{0,2}", "{1,3}", "{0}", "{2,}",
	"{1}", "{0,1}"}

func (g *gen) item(depth int) (string, string) {
	if g.r.Intn(12) == 0 { // a flag group: applies to the rest of the group
		return "(?" + g.pick(flags[:len(flags)-4]) + ")", ""
	}
	if g.r.Intn(40) == 0 {
		return g.pick([]string{"a{", "{", "}", "x{,2}", "x{01}", "a{1,", "]"}),
			""
	}
	p, s := g.atom(depth)
	if g.r.Intn(3) != 0 {
		return p, s
	}
	q := g.pick(quants)
	if g.r.Intn(5) == 0 {
		q += "?"
	}
	switch {
	case q[0] == '*' || q[0] == '?' || q == "{0}" || q == "{0,2}?":
		s = ""
	case q[0] == '{' && q[1] == '2':
		s = s + s
	}
	return p + q, s
}

func (g *gen) cat(depth int) (string, string) {
	var p, s strings.Builder
	for n := g.r.Intn(6) - 1; n >= 0; n-- { // sometimes empty
		a, b := g.item(depth)
		p.WriteString(a)
		s.WriteString(b)
	}
	return p.String(), s.String()
}

// branchMark starts each branch of an alternation in the generated text:
// the pattern drops it, its twin makes it "(?:)" (see judge).
const branchMark = "\x00"

func (g *gen) alt(depth int) (string, string) {
	p, s := g.cat(depth)
	branches := []string{p}
	for g.r.Intn(4) == 0 {
		q, t := g.cat(depth)
		branches = append(branches, q)
		if g.r.Intn(2) == 0 {
			s = t
		}
	}
	if len(branches) == 1 {
		return p, s
	}
	return branchMark + strings.Join(branches, "|"+branchMark), s
}

// glob returns a pattern of the shape L0.*L1.*...Ln, which Ember matches
// with memcmp and memmem instead of its NFA, and a subject for it.
func (g *gen) glob() (string, string) {
	segs := []string{"", "ab", "a", "\u03c3", "\n", "b\nb", "\u00e9a", "x"}
	var p, s strings.Builder
	if g.r.Intn(3) == 0 {
		p.WriteString("(?-s)")
	}
	for n := 1 + g.r.Intn(4); n >= 0; n-- {
		seg := g.pick(segs)
		p.WriteString(regexp.QuoteMeta(seg))
		s.WriteString(seg)
		if n > 0 {
			p.WriteString(".*")
			for k := g.r.Intn(3); k > 0; k-- {
				s.WriteString(g.pick(alphabet))
			}
		}
	}
	return p.String(), s.String()
}

// pattern returns a pattern, its twin (the same meaning, see judge) and a
// subject sampled from it.
func (g *gen) pattern() (string, string, string) {
	if g.r.Intn(10) == 0 {
		p, s := g.glob()
		return p, p, s
	}
	p, s := g.alt(2)
	if g.r.Intn(12) == 0 { // a share of invalid patterns
		bad := g.pick(invalid)
		at := g.r.Intn(len(p) + 1)
		for at > 0 && at < len(p) && p[at]&0xc0 == 0x80 {
			at-- // keep the pattern valid UTF-8
		}
		p = strings.ReplaceAll(p[:at]+bad+p[at:], branchMark, "")
		return p, p, s
	}
	return strings.ReplaceAll(p, branchMark, ""),
		strings.ReplaceAll(p, branchMark, "(?:)"), s
}

// mutate changes SAMPLE a little: a case flip, a dropped, doubled or
// inserted character, or a character from the alphabet.
func (g *gen) mutate(s string) string {
	rs := []string{}
	for _, c := range s {
		rs = append(rs, string(c))
	}
	i := 0
	if len(rs) > 0 {
		i = g.r.Intn(len(rs))
	}
	switch g.r.Intn(5) {
	case 0:
		if len(rs) > 0 {
			c := rs[i]
			if u := strings.ToUpper(c); u != c {
				rs[i] = u
			} else {
				rs[i] = strings.ToLower(c)
			}
		}
	case 1:
		if len(rs) > 0 {
			rs = append(rs[:i], rs[i+1:]...)
		}
	case 2:
		if len(rs) > 0 {
			rs = append(rs[:i+1], rs[i:]...)
		}
	default:
		rs = append(rs[:i], append([]string{g.pick(alphabet)}, rs[i:]...)...)
	}
	return strings.Join(rs, "")
}

func (g *gen) subjects(sample string, n int) []string {
	out := []string{sample}
	for len(out) < n {
		if g.r.Intn(2) == 0 {
			out = append(out, g.mutate(out[g.r.Intn(len(out))]))
			continue
		}
		var b strings.Builder
		for k := g.r.Intn(6); k > 0; k-- {
			b.WriteString(g.pick(alphabet))
		}
		out = append(out, b.String())
	}
	return out
}

// twinDiffers counts the subjects on which a pattern and its twin disagree.
var twinDiffers int

// judge prints the pattern line with Go's verdict, and returns the matcher
// (nil when it does not compile). Subjects are matched with TWIN, the
// pattern with "(?:)" at the head of each branch of its alternations: the
// same meaning, but it keeps Go 1.19's parser from factoring the branches,
// which wrongly merges a literal with a case-folded one (golang/go#59007,
// fixed in Go 1.23: there A|(?i:a)\z does not match "a").
func judge(w *bufio.Writer, pat, twin string) func(string) bool {
	m, err := compile(pat)
	if err != nil {
		fmt.Fprintf(w, "p %x err\n", pat)
		return nil
	}
	fmt.Fprintf(w, "p %x ok\n", pat)
	if twin == pat {
		return m
	}
	t, err := compile(twin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "regexdiff: twin %q of %q: %v\n", twin, pat, err)
		os.Exit(1)
	}
	return func(s string) bool {
		if m(s) != t(s) {
			twinDiffers++
		}
		return t(s)
	}
}

// compile wraps PAT as Prometheus does (model/labels/regexp.go). A pattern
// that only the wrapping makes valid, as "a)(b" (^(?s:a)(b)$), counts as
// rejected: Ember rejects it on purpose (docs/regex.md).
func compile(pat string) (func(string) bool, error) {
	if _, err := regexp.Compile(pat); err != nil {
		return nil, err
	}
	re, err := regexp.Compile("^(?s:" + pat + ")$")
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

func verdict(w *bufio.Writer, m func(string) bool, s string) {
	v := 0
	if m != nil && m(s) {
		v = 1
	}
	fmt.Fprintf(w, "s %x %d\n", s, v)
}

func generate(w *bufio.Writer, seed int64, n, nsub int) {
	g := &gen{r: rand.New(rand.NewSource(seed))}
	for i := 0; i < n; i++ {
		g.names = 0
		p, twin, s := g.pattern()
		m := judge(w, p, twin)
		if m == nil {
			continue
		}
		for _, sub := range g.subjects(s, nsub) {
			verdict(w, m, sub)
		}
	}
}

func judgeInput(w *bufio.Writer) error {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var m func(string) bool
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != "p" && f[0] != "s") {
			if len(f) == 1 && (f[0] == "p" || f[0] == "s") {
				f = append(f, "") // the empty string
			} else {
				return fmt.Errorf("bad line %q", sc.Text())
			}
		}
		b, err := hex.DecodeString(f[1])
		if err != nil {
			return err
		}
		if f[0] == "p" {
			m = judge(w, string(b), string(b))
		} else {
			verdict(w, m, string(b))
		}
	}
	return sc.Err()
}

func main() {
	seed := flag.Int64("seed", 1, "generator seed")
	n := flag.Int("n", 3000, "patterns to generate")
	nsub := flag.Int("subjects", 12, "subjects per pattern")
	judgeMode := flag.Bool("judge", false, "judge the cases on stdin")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *judgeMode {
		if err := judgeInput(w); err != nil {
			fmt.Fprintln(os.Stderr, "regexdiff:", err)
			w.Flush()
			os.Exit(1)
		}
		return
	}
	generate(w, *seed, *n, *nsub)
	fmt.Fprintf(os.Stderr, "regexdiff: %d verdicts taken from the unfactored "+
		"twin differ from the pattern's own (golang/go#59007)\n", twinDiffers)
}
