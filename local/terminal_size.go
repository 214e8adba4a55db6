package local

import (
	"os"
	"sync"
	"time"

	"github.com/creack/pty"
)

// sizeKeepFor is how long after a resize the terminal checks that the pty
// still has the size the browser asked for.
const sizeKeepFor = 2 * time.Second

// sizeKeeper holds the size a terminal's browser last asked for and puts it
// back when the shell undid it. Readline reads the pty's size and writes
// the same value back each time it shows a prompt (rltty.c set_winsize); a
// resize that lands between its read and its write is lost, and the
// terminal would keep the old size until the next resize. The prompt that
// follows that write is output, so each read of output shortly after a
// resize checks the size once. Outside that window a program in the desktop
// may set its own size (stty cols 100) and keeps it.
type sizeKeeper struct {
	mu    sync.Mutex
	want  pty.Winsize
	until time.Time
}

// set gives f the size cols×rows and keeps it for a while.
func (k *sizeKeeper) set(f *os.File, cols, rows uint16) error {
	k.mu.Lock()
	k.want = pty.Winsize{Cols: cols, Rows: rows}
	k.until = time.Now().Add(sizeKeepFor)
	k.mu.Unlock()
	return pty.Setsize(f, &pty.Winsize{Cols: cols, Rows: rows})
}

// keep puts the wanted size back on f if a resize was recent and f's size
// differs from it.
func (k *sizeKeeper) keep(f *os.File) {
	k.mu.Lock()
	want, recent := k.want, time.Now().Before(k.until)
	k.mu.Unlock()
	if !recent {
		return
	}
	rows, cols, err := pty.Getsize(f)
	if err != nil || (uint16(cols) == want.Cols && uint16(rows) == want.Rows) {
		return
	}
	pty.Setsize(f, &want)
}
