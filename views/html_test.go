package views

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// mustParse parses a rendered page.
func mustParse(tb testing.TB, page string) *html.Node {
	tb.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		tb.Fatalf("parse the rendered page: %v", err)
	}
	return doc
}

// findAll returns the elements under n for which match reports true, in
// document order.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var got []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			got = append(got, d)
		}
	}
	return got
}

// attr returns n's attribute key, and whether it has one.
func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// hasAttrs returns a matcher of elements carrying every key=value of kv.
func hasAttrs(kv ...string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		for i := 0; i+1 < len(kv); i += 2 {
			if v, ok := attr(n, kv[i]); !ok || v != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// byTestID returns the elements with data-testid id.
func byTestID(doc *html.Node, id string) []*html.Node {
	return findAll(doc, hasAttrs("data-testid", id))
}

// text returns the text under n, as a reader sees it (unescaped).
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
