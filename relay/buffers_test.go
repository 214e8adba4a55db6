package relay

import (
	"bytes"
	"net"
	"slices"
	"testing"
)

// TestBurstReader: on a pipe, a quiet conn is read into the small buffer;
// a write larger than it is read into a lent full-size buffer until a read
// comes back short, and the next read gives that buffer back; every byte
// arrives, in order, each read's bytes intact until the next read.
func TestBurstReader(t *testing.T) {
	a, c := net.Pipe()
	defer a.Close()
	defer c.Close()
	b := newBurstReader(c, 64<<10)
	defer b.release()
	write := func(p []byte) {
		go func() {
			if _, err := a.Write(p); err != nil {
				t.Error(err)
			}
		}()
	}

	write([]byte("hello"))
	p, err := b.read()
	if err != nil || string(p) != "hello" || b.big != nil {
		t.Fatalf("a quiet read: %q, %v, lent buffer %v; want hello in the small buffer", p, err, b.big != nil)
	}

	burst := make([]byte, 4<<10+2*64<<10+1000)
	for i := range burst {
		burst[i] = byte(i * 7)
	}
	write(burst)
	var got []byte
	var sizes []int
	for len(got) < len(burst) {
		p, err := b.read()
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p))
		got = append(got, p...)
	}
	if !bytes.Equal(got, burst) {
		t.Fatal("the burst arrived changed")
	}
	if want := []int{4 << 10, 64 << 10, 64 << 10, 1000}; !slices.Equal(sizes, want) {
		t.Errorf("reads of %v bytes; want %v (the small buffer, then the lent one)", sizes, want)
	}
	if b.big == nil {
		t.Fatal("the last read's bytes are in the lent buffer: it must be kept until the next read")
	}

	write([]byte("quiet again"))
	p, err = b.read()
	if err != nil || string(p) != "quiet again" || b.big != nil {
		t.Errorf("after the burst: %q, %v, lent buffer %v; want it given back and the small buffer used", p, err, b.big != nil)
	}
}
