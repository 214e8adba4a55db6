package relay

import "testing"

// FuzzParseResize checks the terminal control message parser: no input
// panics it, every resize it accepts is within bounds, and the message the
// browser would send for that size parses back to it.
func FuzzParseResize(f *testing.F) {
	f.Add([]byte(`{"type":"resize","cols":120,"rows":40}`))
	f.Add([]byte(`{"type":"resize","cols":0,"rows":40}`))
	f.Add([]byte(`{"type":"resize","cols":1e9,"rows":-1}`))
	f.Add([]byte(`{"type":"input","data":"ls\n"}`))
	f.Add([]byte("ls -la\r"))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, ok := ParseResize(p)
		if !ok {
			return
		}
		if r.Cols == 0 || r.Rows == 0 || r.Cols > 1000 || r.Rows > 1000 {
			t.Fatalf("ParseResize(%q) = %+v: out of bounds", p, r)
		}
		if len(p) > maxControl {
			t.Fatalf("ParseResize took a %d-byte frame", len(p))
		}
		again, ok := ParseResize(ResizeMessage(r))
		if !ok || again != r {
			t.Fatalf("ResizeMessage(%+v) parses as %+v, %v", r, again, ok)
		}
	})
}
