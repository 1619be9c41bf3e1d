package anchor

import (
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// corpus generates English-like documents for tests and benchmarks: a
// skewed mix of function words, a contract vocabulary and pronounceable
// invented words, in sentences and paragraphs, with some typographic
// punctuation and accented words, so that word and bigram frequencies look
// like real text rather than one repeated sentence.
type corpus struct {
	rng   *rand.Rand
	vocab []string
}

var functionWords = strings.Fields(`the of and to a in is that for it as with be on not by this
are or shall which any such may all from its at no each will under other than
been has have its their upon into only if where when prior without within`)

var contentWords = strings.Fields(`agreement party parties seller buyer goods delivery payment
invoice price term notice period written consent breach remedy damages liability
indemnity warranty clause section schedule annex contract obligation performance
termination effective date days months year business confidential information
disclosure property rights license fee amount interest rate late charges tax
insurance risk title transfer inspection acceptance rejection defect repair
replacement refund dispute arbitration court law jurisdiction governing venue
assignment subcontractor affiliate employee officer director representative
force majeure event circumstance control reasonable efforts mitigate loss
compliance regulation audit records report quarter annual budget forecast
service level availability response resolution incident maintenance support
renewal extension amendment waiver severability entire counterpart signature
café naïve façade résumé Zürich coöperation déjà fiancée Øresund Straße
don’t won’t isn’t shan’t it’s party’s seller’s buyer’s`)

func newCorpus(seed uint64) *corpus {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	vocab := append([]string(nil), contentWords...)
	onsets := strings.Fields("b c d f g h k l m n p r s t v w br cr dr fl gr pl pr st tr")
	nuclei := strings.Fields("a e i o u ai ea ou io")
	codas := []string{"", "", "n", "r", "s", "t", "l", "nd", "st", "ck"}
	seen := make(map[string]bool)
	for len(vocab) < 2500 {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString(onsets[rng.IntN(len(onsets))])
			b.WriteString(nuclei[rng.IntN(len(nuclei))])
		}
		b.WriteString(codas[rng.IntN(len(codas))])
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &corpus{rng: rng, vocab: vocab}
}

// word draws a word: function words often, other words with a skew
// towards the start of the vocabulary.
func (c *corpus) word() string {
	if c.rng.IntN(10) < 4 {
		return functionWords[c.rng.IntN(len(functionWords))]
	}
	u := c.rng.Float64()
	return c.vocab[int(u*u*float64(len(c.vocab)))]
}

// sentence is 8 to 25 words, capitalised, with the odd comma, dash, number
// or quoted phrase.
func (c *corpus) sentence() string {
	n := 8 + c.rng.IntN(18)
	var b strings.Builder
	for i := range n {
		w := c.word()
		if i == 0 {
			r, size := utf8.DecodeRuneInString(w)
			w = string(unicode.ToUpper(r)) + w[size:]
		}
		if i > 0 {
			switch c.rng.IntN(40) {
			case 0:
				b.WriteString(", ")
			case 1:
				b.WriteString(" — ")
			case 2:
				b.WriteString(" “")
				b.WriteString(w)
				b.WriteString("” ")
				continue
			case 3:
				b.WriteString(" ")
				b.WriteString(strings.Repeat("1", 1+c.rng.IntN(3)))
				b.WriteString("0 ")
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteString(w)
	}
	b.WriteByte('.')
	return b.String()
}

// document returns pages of about pageSize bytes until the whole reaches
// size bytes. Sentences are wrapped into lines, paragraphs separated by a
// blank line.
func (c *corpus) document(size, pageSize int) []string {
	var pages []string
	total := 0
	for total < size {
		var b strings.Builder
		line := 0
		for b.Len() < pageSize {
			s := c.sentence()
			switch {
			case line > 0 && c.rng.IntN(6) == 0:
				b.WriteString("\n\n")
				line = 0
			case line+len(s) > 80 && line > 0:
				b.WriteByte('\n')
				line = 0
			case line > 0:
				b.WriteByte(' ')
				line++
			}
			b.WriteString(s)
			line += len(s)
		}
		pages = append(pages, b.String())
		total += b.Len() + 1
	}
	return pages
}

// text is about n bytes of sentences on one line.
func (c *corpus) text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.sentence())
	}
	return b.String()
}

// excerpt picks about n bytes of text starting and ending at word
// boundaries, at a random place, and returns it with the page it starts on.
func (c *corpus) excerpt(pages []string, n int) (string, int) {
	for {
		p := c.rng.IntN(len(pages))
		page := pages[p]
		if len(page) < n+2 {
			continue
		}
		lo := c.rng.IntN(len(page) - n)
		for lo > 0 && page[lo-1] != ' ' {
			lo--
		}
		hi := lo + n
		for hi < len(page) && page[hi] != ' ' && page[hi] != '\n' {
			hi++
		}
		if s := strings.TrimSpace(page[lo:hi]); utf8.ValidString(s) && s != "" {
			return s, p + 1
		}
	}
}

// restyle makes a quote that only a normalised match finds: typographic
// quotes and dashes become straight ones, line breaks spaces, the first
// words capitals, single spaces double, and the whole is wrapped in
// quotation marks.
func (c *corpus) restyle(s string) string {
	s = strings.NewReplacer("’", "'", "“", `"`, "”", `"`, " — ", " - ", "\n", " ").Replace(s)
	words := strings.Split(s, " ")
	for i := range min(3, len(words)) {
		words[i] = strings.ToUpper(words[i])
	}
	return "“" + strings.Join(words, "  ") + "”"
}

// paraphrase changes a quote the way a model misquotes: it substitutes
// subs words and deletes dels words, at random places away from the ends.
func (c *corpus) paraphrase(s string, subs, dels int) string {
	words := strings.Fields(s)
	for range subs {
		i := 1 + c.rng.IntN(len(words)-2)
		words[i] = c.word()
	}
	for range dels {
		i := 1 + c.rng.IntN(len(words)-2)
		words = append(words[:i], words[i+1:]...)
	}
	return strings.Join(words, " ")
}
