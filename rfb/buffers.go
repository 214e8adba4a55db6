package rfb

// Update buffers: a client's pixels and message, and the hub's rectangle
// from the desktop, are kept for the next update while small.

// keepMax is the largest update buffer a client (or the hub, for what the
// desktop sends) keeps for its next update; a larger one (a full screen is
// 4 MiB) is made for its update and dropped after it.
const keepMax = 256 << 10

// scratch returns a buffer of n bytes for an update: kept's storage when
// n is at most keepMax and fits in it, else a new one.
func scratch(kept []byte, n int) []byte {
	if n > keepMax || cap(kept) < n {
		return make([]byte, n)
	}
	return kept[:n]
}

// keep returns b to be kept for the next update, or nil when it is over
// keepMax.
func keep(b []byte) []byte {
	if cap(b) > keepMax {
		return nil
	}
	return b[:0]
}
