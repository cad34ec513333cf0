package schemas

import (
	"bytes"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// fastYAML reads the YAML that fleet files are made of — block mappings
// and sequences, one-line flow collections, plain and quoted one-line
// scalars, comments, several documents — into the same nodes as yaml.v3
// (kind, resolved tag, value, style, line and column; comments are not
// kept), several times faster: parsing was most of reading a file a
// validation cache already vouches for. Anything else — block scalars,
// anchors and aliases, tags, escapes, multi-line scalars, empty values,
// tabs, CR, invalid UTF-8, anything malformed — makes it answer ok=false,
// and the caller reads the file with yaml.v3, which also says what is wrong.
// FuzzFastYAML holds it to yaml.v3 on every input it accepts.
//
// It returns each document's root node; documents with no content (only
// comments, or a stray ---) have none.
func fastYAML(data []byte) (roots []*yaml.Node, ok bool) {
	if !utf8.Valid(data) || bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, false
	}
	p := &fastParser{}
	start := 0
	for start <= len(data) {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start
		}
		p.lines = append(p.lines, data[start:end])
		start = end + 1
	}
	for i, l := range p.lines {
		ascii := true
		for _, c := range l {
			if c < ' ' || c == 0x7f {
				return nil, false // tabs, CR, control characters
			}
			ascii = ascii && c < utf8.RuneSelf
		}
		if !ascii && !plainRunes(l) {
			return nil, false
		}
		if len(l) >= 3 && (l[0] == '-' || l[0] == '.') && (string(l[:3]) == "---" || string(l[:3]) == "...") {
			if l[0] == '.' || !endsLine(l, 3) {
				return nil, false // document end markers, or content after ---
			}
			p.docStarts = append(p.docStarts, i)
		}
		if len(l) > 0 && l[0] == '%' {
			return nil, false // directives
		}
	}
	p.docStarts = append(p.docStarts, len(p.lines))
	from := 0
	for _, to := range p.docStarts {
		p.li, p.end = from, to
		if p.next() {
			root := p.node(-1, false)
			if root == nil || p.next() {
				return nil, false // malformed, or content left over
			}
			roots = append(roots, root)
		}
		from = to + 1
	}
	return roots, true
}

// plainRunes reports whether l holds only characters YAML prints and does
// not take for line breaks: not C1 controls (NEL among them), the line and
// paragraph separators, a byte order mark or the non-characters U+FFFE and
// U+FFFF, which yaml.v3 breaks lines at or refuses.
func plainRunes(l []byte) bool {
	for _, r := range string(l) {
		if r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff {
			return false
		}
	}
	return true
}

// maxFastDepth bounds nesting: deeper documents are yaml.v3's, which has
// its own limit.
const maxFastDepth = 100

type fastParser struct {
	lines     [][]byte
	docStarts []int // lines that are ---
	li, end   int   // the current line, and the end of the current document
	col       int   // where the next token starts on line li
	depth     int   // of nested collections
	slab      []yaml.Node
}

// endsLine reports whether l holds nothing but spaces and a comment from i.
func endsLine(l []byte, i int) bool {
	for i < len(l) && l[i] == ' ' {
		i++
	}
	return i == len(l) || (l[i] == '#' && (i == 0 || l[i-1] == ' '))
}

// next moves to the next line with content from the current one (itself
// included, from col when it is set past the indentation) and reports
// whether there is one in the document.
func (p *fastParser) next() bool {
	for ; p.li < p.end; p.li++ {
		l := p.lines[p.li]
		i := 0
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if i < len(l) && l[i] != '#' {
			p.col = i
			return true
		}
	}
	return false
}

// indent is the current line's indentation.
func (p *fastParser) indent() int {
	l := p.lines[p.li]
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	return i
}

func (p *fastParser) newNode(kind yaml.Kind, li, col int) *yaml.Node {
	if len(p.slab) == cap(p.slab) {
		// Nodes are allocated together: the first slab holds about what a
		// fleet file has (a key and a value a line), the next ones 32 more.
		n := 32
		if p.slab == nil {
			n = 2*len(p.lines) + 8
		}
		p.slab = make([]yaml.Node, 0, n)
	}
	p.slab = append(p.slab, yaml.Node{Kind: kind, Line: li + 1, Column: column(p.lines[li], col)})
	return &p.slab[len(p.slab)-1]
}

// column is yaml.v3's column of byte i of l: it counts characters.
func column(l []byte, i int) int {
	for _, c := range l[:i] {
		if c >= utf8.RuneSelf {
			return utf8.RuneCount(l[:i]) + 1
		}
	}
	return i + 1
}

// isSeqEntry reports whether a block sequence entry starts at i.
func isSeqEntry(l []byte, i int) bool {
	return i < len(l) && l[i] == '-' && (i+1 == len(l) || l[i+1] == ' ')
}

// node reads the node at (li, col). parent is the indentation of the
// enclosing block collection; a sequence may sit at its parent mapping's
// indentation (sameIndentSeq).
func (p *fastParser) node(parent int, sameIndentSeq bool) *yaml.Node {
	if p.depth++; p.depth > maxFastDepth {
		return nil
	}
	defer func() { p.depth-- }()
	l := p.lines[p.li]
	if isSeqEntry(l, p.col) {
		if p.col <= parent && !(sameIndentSeq && p.col == parent) {
			return nil
		}
		return p.sequence(p.col)
	}
	if p.col <= parent {
		return nil
	}
	if _, _, ok := keyEnd(l, p.col); ok {
		return p.mapping(p.col)
	}
	return p.leaf(parent, sameIndentSeq)
}

// leaf reads a scalar or flow collection that ends its line at (li, col).
func (p *fastParser) leaf(parent int, sameIndentSeq bool) *yaml.Node {
	l := p.lines[p.li]
	n, i := p.inline(l, p.col, false)
	if n == nil || !endsLine(l, i) {
		return nil
	}
	p.li++
	if p.next() && p.indent() > parent && !(sameIndentSeq && p.indent() == parent) {
		return nil // more of it below: a multi-line scalar, or malformed
	}
	return n
}

// sequence reads a block sequence whose entries are at column ind.
func (p *fastParser) sequence(ind int) *yaml.Node {
	seq := p.newNode(yaml.SequenceNode, p.li, ind)
	seq.Tag = "!!seq"
	for {
		l := p.lines[p.li]
		if p.col != ind || !isSeqEntry(l, ind) {
			return nil
		}
		p.col = ind + 1
		for p.col < len(l) && l[p.col] == ' ' {
			p.col++
		}
		var item *yaml.Node
		if endsLine(l, p.col) {
			p.li++
			if !p.next() || p.indent() <= ind {
				return nil // an empty entry
			}
			item = p.node(ind, false)
		} else {
			item = p.node(ind, false)
		}
		if item == nil {
			return nil
		}
		seq.Content = append(seq.Content, item)
		if !p.next() {
			return seq
		}
		switch in := p.indent(); {
		case in < ind:
			return seq
		case in > ind:
			return nil
		case !isSeqEntry(p.lines[p.li], ind):
			return seq // the parent mapping's next key
		}
	}
}

// mapping reads a block mapping whose keys are at column ind.
func (p *fastParser) mapping(ind int) *yaml.Node {
	m := p.newNode(yaml.MappingNode, p.li, ind)
	m.Tag = "!!map"
	for {
		l := p.lines[p.li]
		if p.col != ind {
			return nil
		}
		k, after, ok := p.key(l, ind)
		if !ok {
			return nil
		}
		p.col = after
		for p.col < len(l) && l[p.col] == ' ' {
			p.col++
		}
		var v *yaml.Node
		if endsLine(l, p.col) {
			p.li++
			if !p.next() {
				return nil // an empty value
			}
			in := p.indent()
			if in < ind || (in == ind && !isSeqEntry(p.lines[p.li], ind)) {
				return nil // an empty value
			}
			v = p.node(ind, true)
		} else {
			v = p.leaf(ind, false) // no block collection starts after a key
		}
		if v == nil {
			return nil
		}
		m.Content = append(m.Content, k, v)
		if !p.next() {
			return m
		}
		switch in := p.indent(); {
		case in < ind:
			return m
		case in > ind:
			return nil
		case isSeqEntry(p.lines[p.li], ind):
			return m // the entries of a sequence this mapping is in
		}
	}
}

// keyEnd finds a mapping key at byte i of l — a plain or quoted scalar
// followed by ':' and a space or the line's end — and returns where the
// scalar ends and where its value may start.
func keyEnd(l []byte, i int) (end, after int, ok bool) {
	if i >= len(l) {
		return 0, 0, false
	}
	if q := l[i]; q == '"' || q == '\'' {
		end = quoteEnd(l, i)
		if end < 0 {
			return 0, 0, false
		}
	} else {
		if !plainStart(l, i, false) {
			return 0, 0, false
		}
		j := i
		for j < len(l) && !(l[j] == ':' && (j+1 == len(l) || l[j+1] == ' ')) {
			if l[j] == '#' && l[j-1] == ' ' {
				return 0, 0, false // a comment: no key on this line
			}
			j++
		}
		end = j
	}
	if end-i > 1000 || end >= len(l) || l[end] != ':' || (end+1 < len(l) && l[end+1] != ' ') {
		return 0, 0, false
	}
	return end, end + 1, true
}

// key reads the mapping key keyEnd found.
func (p *fastParser) key(l []byte, i int) (k *yaml.Node, after int, ok bool) {
	end, after, ok := keyEnd(l, i)
	if !ok {
		return nil, 0, false
	}
	if l[i] == '"' || l[i] == '\'' {
		k, _ = p.quoted(l, i)
	} else {
		for end > i && l[end-1] == ' ' {
			end--
		}
		k = p.plain(l, i, end)
	}
	return k, after, k != nil
}

// inline reads a scalar or a one-line flow collection at byte i of l and
// returns where it ends.
func (p *fastParser) inline(l []byte, i int, flow bool) (*yaml.Node, int) {
	if i >= len(l) || p.depth >= maxFastDepth {
		return nil, i
	}
	p.depth++
	defer func() { p.depth-- }()
	switch l[i] {
	case '"', '\'':
		return p.quoted(l, i)
	case '[', '{':
		return p.flow(l, i)
	}
	if !plainStart(l, i, flow) {
		return nil, i
	}
	j := i
	for j < len(l) {
		c := l[j]
		if c == ':' && (flow || j+1 == len(l) || l[j+1] == ' ') {
			break
		}
		if c == '#' && l[j-1] == ' ' {
			break
		}
		if flow && (c == ',' || c == '?' || c == '[' || c == ']' || c == '{' || c == '}') {
			break
		}
		j++
	}
	end := j
	for end > i && l[end-1] == ' ' {
		end--
	}
	n := p.plain(l, i, end)
	return n, j
}

// plainStart reports whether a plain scalar may start at byte i: not with
// an indicator (a '-' before a letter, digit or '.' is a sign, or a word).
func plainStart(l []byte, i int, flow bool) bool {
	switch c := l[i]; c {
	case '-':
		return i+1 < len(l) && (isAlnum(l[i+1]) || l[i+1] == '.')
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ':
		return false
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// plain makes the plain scalar l[i:end], its tag resolved as yaml.v3 does.
func (p *fastParser) plain(l []byte, i, end int) *yaml.Node {
	if end <= i {
		return nil
	}
	v := string(l[i:end])
	if v == "<<" {
		return nil // a merge key
	}
	n := p.newNode(yaml.ScalarNode, p.li, i)
	n.Value = v
	n.Tag = plainTag(n)
	return n
}

// plainTag is yaml.v3's resolution of the plain scalar n (its ShortTag),
// without it for what most of a fleet file's scalars are: a word that
// starts with a letter. yaml.v3 reads a scalar as a string unless its
// first character may start a number, a bool, a null, an infinity or NaN
// (+ - . ~ digits and y n t f o, either case); of those starting with a
// letter, only true, false and null in their three spellings are not
// strings. Anything else is yaml.v3's to resolve (FuzzFastYAML compares
// every tag).
func plainTag(n *yaml.Node) string {
	switch v := n.Value; v[0] {
	case '+', '-', '.', '~', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return n.ShortTag()
	case 't', 'T':
		if v == "true" || v == "True" || v == "TRUE" {
			return "!!bool"
		}
	case 'f', 'F':
		if v == "false" || v == "False" || v == "FALSE" {
			return "!!bool"
		}
	case 'n', 'N':
		if v == "null" || v == "Null" || v == "NULL" {
			return "!!null"
		}
	}
	return "!!str"
}

// quoteEnd returns the index of the quote closing the one-line quoted
// scalar at byte i, or -1 (not closed, or a double-quoted escape, which
// is yaml.v3's to read).
func quoteEnd(l []byte, i int) int {
	q := l[i]
	for j := i + 1; j < len(l); j++ {
		switch c := l[j]; {
		case c == '\\' && q == '"':
			return -1
		case c == q && q == '\'' && j+1 < len(l) && l[j+1] == '\'':
			j++ // '' is a quote
		case c == q:
			return j + 1
		}
	}
	return -1
}

// quoted reads the one-line quoted scalar at byte i.
func (p *fastParser) quoted(l []byte, i int) (*yaml.Node, int) {
	end := quoteEnd(l, i)
	if end < 0 {
		return nil, i
	}
	n := p.newNode(yaml.ScalarNode, p.li, i)
	raw := l[i+1 : end-1]
	n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
	if l[i] == '\'' {
		n.Style = yaml.SingleQuotedStyle
		if bytes.Contains(raw, []byte("''")) {
			n.Value = string(bytes.ReplaceAll(raw, []byte("''"), []byte("'")))
			return n, end
		}
	}
	n.Value = string(raw)
	return n, end
}

// flow reads a one-line flow collection at byte i: [a, b, {c: d}] or
// {a: b, c: [d]}.
func (p *fastParser) flow(l []byte, i int) (*yaml.Node, int) {
	n := p.newNode(yaml.SequenceNode, p.li, i)
	n.Tag, n.Style = "!!seq", yaml.FlowStyle
	closer := byte(']')
	if l[i] == '{' {
		n.Kind, n.Tag, closer = yaml.MappingNode, "!!map", '}'
	}
	j := skipSpaces(l, i+1)
	if j < len(l) && l[j] == closer {
		return n, j + 1
	}
	for {
		item, k := p.inline(l, j, true)
		if item == nil {
			return nil, i
		}
		n.Content = append(n.Content, item)
		if n.Kind == yaml.MappingNode { // item is a key: its value follows ": "
			if item.Kind != yaml.ScalarNode || k+1 >= len(l) || l[k] != ':' || l[k+1] != ' ' {
				return nil, i
			}
			var v *yaml.Node
			if v, k = p.inline(l, skipSpaces(l, k+1), true); v == nil {
				return nil, i
			}
			n.Content = append(n.Content, v)
		}
		k = skipSpaces(l, k)
		if k >= len(l) {
			return nil, i
		}
		switch l[k] {
		case closer:
			return n, k + 1
		case ',':
			j = skipSpaces(l, k+1)
			if j >= len(l) || l[j] == closer || l[j] == ',' {
				return nil, i // a trailing or empty entry
			}
		default:
			return nil, i
		}
	}
}

func skipSpaces(l []byte, i int) int {
	for i < len(l) && l[i] == ' ' {
		i++
	}
	return i
}
