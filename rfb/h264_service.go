package rfb

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The H.264 encoder service: where the portal cannot run an encoder
// itself (its Kubernetes image has no libc and no GStreamer), a process
// beside it runs them for its hubs — the encoder sidecar of the portal's
// Pod, `corral-vdi-portal encoder`, on a Unix socket in a volume the two
// containers share. A hub whose program is "unix:PATH" connects to PATH
// for each encoder it starts and writes one line, "corral-h264 2 W H FPS\n"
// (the encoded size, even, and the most screens a second it will send,
// which the encoder's bitrate is set for), then the screens, as to an encoder's stdin;
// it reads the encoder's stdout back. The service runs its own pipeline
// (h264Pipeline) and nothing else, at a size within maxDimension and a
// rate within maxEncoderFPS: the portal names numbers, never a command.
// (Version 1's line had no rate; its encoders took every stream as 30
// frames a second.)

// encoderHello starts a connection to the encoder service.
const encoderHello = "corral-h264 2"

// encoderHelloTimeout bounds the wait for a connection's first line.
const encoderHelloTimeout = 10 * time.Second

// DefaultMaxEncoders is how many encoders the service runs at once by
// default: one per desktop with an H.264 viewer, each up to half a core
// in motion.
const DefaultMaxEncoders = 32

// dial connects e to the encoder service at path.
func (e *encoder) dial(ctx context.Context, path string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("rfb: the H.264 encoder service: %w", err)
	}
	if _, err := fmt.Fprintf(conn, "%s %d %d %d\n", encoderHello, e.pw, e.ph, e.fps); err != nil {
		conn.Close()
		return fmt.Errorf("rfb: the H.264 encoder service: %w", err)
	}
	e.in, e.out = conn, bufio.NewReaderSize(conn, 64<<10)
	e.kill = func() { conn.Close() }
	e.reap = func() error { return nil }
	return nil
}

// EncoderServiceConfig configures ServeEncoders.
type EncoderServiceConfig struct {
	// Program is GStreamer's gst-launch-1.0 (with x264enc); required.
	Program string
	// Max is how many encoders run at once (DefaultMaxEncoders if zero);
	// a connection beyond it is closed at once, and its hub's viewers
	// get tiles.
	Max int
	// Log hears refused connections and encoders that failed; nil:
	// slog.Default().
	Log *slog.Logger
}

// ServeEncoders runs an H.264 encoder for each connection ln accepts,
// until ctx ends or ln fails, and returns once the encoders ended.
func ServeEncoders(ctx context.Context, ln net.Listener, cfg EncoderServiceConfig) error {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMaxEncoders
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	slots := make(chan struct{}, cfg.Max)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case slots <- struct{}{}:
		default:
			cfg.Log.Warn("an H.264 encoder refused: as many run as the service allows", "max", cfg.Max)
			conn.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			serveEncoder(ctx, conn, cfg)
		})
	}
}

// serveEncoder runs one encoder for conn until conn or the encoder ends.
func serveEncoder(ctx context.Context, conn net.Conn, cfg EncoderServiceConfig) {
	defer conn.Close()
	w, h, fps, err := readEncoderHello(conn)
	if err != nil {
		cfg.Log.Warn("an H.264 encoder refused", "err", err)
		return
	}
	cmd := exec.CommandContext(ctx, cfg.Program, h264Pipeline(w, h, fps)...)
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4 << 10}
	cmd.Stdout = conn
	cmd.WaitDelay = 5 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		cfg.Log.Error("an H.264 encoder not started", "err", err)
		return
	}
	if err := cmd.Start(); err != nil {
		cfg.Log.Error("an H.264 encoder not started", "program", cfg.Program, "err", err)
		return
	}
	closed := make(chan struct{}) // the hub closed its end: the encoder was asked to go
	go func() {
		io.Copy(in, conn) // the hub's screens, until it closes
		in.Close()
		close(closed)
	}()
	err = cmd.Wait()
	select {
	case <-closed:
		return
	default:
	}
	if err != nil && ctx.Err() == nil {
		cfg.Log.Warn("an H.264 encoder ended", "size", strconv.Itoa(w)+"x"+strconv.Itoa(h), "err", err, "stderr", strings.TrimSpace(stderr.String()))
	}
}

// readEncoderHello reads a connection's first line, byte by byte (the
// screens follow it), and returns the size and the rate it names.
func readEncoderHello(conn net.Conn) (w, h, fps int, err error) {
	conn.SetReadDeadline(time.Now().Add(encoderHelloTimeout))
	defer conn.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for len(line) < 64 {
		if _, err := io.ReadFull(conn, b); err != nil {
			return 0, 0, 0, fmt.Errorf("no first line: %w", err)
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	f := strings.Fields(string(line))
	if len(f) != 5 || f[0]+" "+f[1] != encoderHello {
		return 0, 0, 0, fmt.Errorf("a first line of %q; want %q W H FPS (a portal of the same release as this encoder)", line, encoderHello)
	}
	w, err1 := strconv.Atoi(f[2])
	h, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || w < 2 || h < 2 || w > maxDimension+1 || h > maxDimension+1 || w%2 != 0 || h%2 != 0 {
		return 0, 0, 0, fmt.Errorf("no encoder for a %sx%s screen: even sides from 2 to %d", f[2], f[3], maxDimension+1)
	}
	fps, err = strconv.Atoi(f[4])
	if err != nil || fps < 1 || fps > maxEncoderFPS {
		return 0, 0, 0, fmt.Errorf("no encoder at %s frames a second: 1 to %d", f[4], maxEncoderFPS)
	}
	return w, h, fps, nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// ListenEncoders listens on the Unix socket at path for ServeEncoders,
// replacing a socket left there by an earlier run; only this user may
// connect (the portal's container runs as the same user).
func ListenEncoders(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
