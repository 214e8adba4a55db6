package local

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/procgroup"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A desktop's clipboard picture: Xvnc (TigerVNC 1.12) carries only text
// on the VNC clipboard, so pictures cross through the desktop's X
// CLIPBOARD selection in image/png, which xclip, run as the desktop's
// user on its display, reads and sets (the clipboard panel's pictures,
// handlers/clipimage.go).

// maxClipPixels bounds a clipboard picture's size in pixels: a small
// PNG may claim a huge canvas, which every program that pastes it would
// allocate.
const maxClipPixels = 64 << 20

// ClipboardImage returns the PNG on the desktop's clipboard, refusing one
// over max bytes (naming the limit), a clipboard without a picture and
// bytes that are not a PNG.
func (d *Desktop) ClipboardImage(ctx context.Context, max int64) ([]byte, error) {
	if !d.clipHasPNG(ctx) {
		return nil, vdi.Errorf(vdi.ENotFound, "Copy a picture in the desktop first.", "The desktop's clipboard holds no picture.")
	}
	var out limitedBuffer
	out.max = max
	if err := d.runX(ctx, nil, &out, "xclip", "-selection", "clipboard", "-t", "image/png", "-o"); err != nil && !out.over {
		return nil, err
	}
	if out.over {
		return nil, vdi.Errorf(vdi.ETooLarge, "Copy a smaller picture.", "The desktop's clipboard picture is larger than the %d MiB a picture may have.", max>>20)
	}
	if err := checkPNG(out.buf.Bytes()); err != nil {
		return nil, err
	}
	return out.buf.Bytes(), nil
}

// SetClipboardImage puts a PNG on the desktop's clipboard.
func (d *Desktop) SetClipboardImage(ctx context.Context, pic []byte) error {
	if err := checkPNG(pic); err != nil {
		return err
	}
	// xclip in the foreground (-quiet) serves the picture until another
	// program takes the clipboard, then ends; a forking xclip's child
	// would end with the sandbox's PID namespace, whose first process
	// xclip is. It owns the selection a moment after it starts (until
	// then the clipboard may still give the picture before): the picture
	// is there once the clipboard gives it.
	cmd, err := d.startX(bytes.NewReader(pic), nil, nil, "xclip", "-quiet", "-selection", "clipboard", "-t", "image/png", "-i")
	if err != nil {
		return err
	}
	xclip := procgroup.Lead(cmd)
	ended := make(chan struct{})
	go func() { xclip.Wait(); close(ended) }()
	for {
		if got, err := d.ClipboardImage(ctx, int64(len(pic))); err == nil && bytes.Equal(got, pic) {
			return nil
		}
		select {
		case <-ended: // another program took the clipboard meanwhile, or xclip failed
			return vdi.Errorf(vdi.EConflict, "Try again.", "The desktop's clipboard changed while the picture went onto it.")
		case <-ctx.Done():
			xclip.Signal(syscall.SIGKILL)
			return vdi.Errorf(vdi.EUnavailable, "Try again; if the desktop is busy, wait a moment.", "The desktop's clipboard did not take the picture in time (%v).", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clipHasPNG reports whether the desktop's clipboard offers image/png.
func (d *Desktop) clipHasPNG(ctx context.Context) bool {
	var targets bytes.Buffer
	err := d.runX(ctx, nil, &targets, "xclip", "-selection", "clipboard", "-t", "TARGETS", "-o")
	return err == nil && strings.Contains("\n"+targets.String(), "\nimage/png\n")
}

// checkPNG refuses what is not a PNG of a sane size.
func checkPNG(b []byte) error {
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return vdi.Errorf(vdi.EInvalid, "Copy a PNG picture.", "Not a PNG picture: %v.", err)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxClipPixels {
		return vdi.Errorf(vdi.ETooLarge, "Copy a smaller picture.", "A %d×%d picture is larger than the %d megapixels a picture may have.", cfg.Width, cfg.Height, maxClipPixels>>20)
	}
	return nil
}

// limitedBuffer keeps at most max bytes and notes whether more came.
// (Not an embedded bytes.Buffer: io.Copy would use its ReadFrom.)
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if int64(l.buf.Len()+len(p)) > l.max {
		l.over = true
		return 0, io.ErrShortWrite // the program stops writing
	}
	return l.buf.Write(p)
}

// runX runs bin with args as the desktop's user on its display, stdin
// and stdout as given (nil: none); its errors say what it printed.
func (d *Desktop) runX(ctx context.Context, stdin io.Reader, stdout io.Writer, bin string, args ...string) error {
	var errOut strings.Builder
	cmd, err := d.startX(stdin, stdout, &errOut, bin, args...)
	if err != nil {
		return err
	}
	proc := procgroup.Lead(cmd)
	select {
	case <-proc.Ended():
	case <-ctx.Done():
		proc.Signal(syscall.SIGKILL)
	}
	if err := proc.Wait(); err != nil {
		return fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(errOut.String()))
	}
	return nil
}

// startX starts bin with args as the desktop's user on its display, in
// a process group of its own, and returns it running.
func (d *Desktop) startX(stdin io.Reader, stdout, stderr io.Writer, bin string, args ...string) (*exec.Cmd, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found: %w", bin, err)
	}
	cmd := d.spec.User.command(path, args...)
	cmd.Dir = d.spec.Home
	d.spec.User.setEnv(cmd, d.Env())
	cmd.SysProcAttr = d.spec.User.sysProcAttr(&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Start()
	closeCgroupFD(cmd.SysProcAttr)
	return cmd, err
}
