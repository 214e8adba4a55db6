package rfb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h264Bitrate is the encoder's budget in kbit/s, a budget per second at
// any pace: a full screen of noise within a 20 Mbit/s link's reach, text
// far below it. x264's rate control spends it by the frame, bitrate/fps a
// frame at the frame rate the stream names, so each encoder is told the
// most screens a second its hub will encode (startEncoder's fps: 60, or 30
// while a sink takes the stream; h264_pace.go) and the stream keeps within
// h264Bitrate a second at that pace and below it at a slower one. Real
// times on the frames would let x264 follow any pace, but it takes a
// stream of variable rate one frame late (it holds each frame until the
// next gives its duration), and a screen must come back as soon as it is
// encoded.
const h264Bitrate = 4000

// encodeTimeout bounds one screen's encoding (milliseconds as a rule; a
// fresh process's first under heavy load, seconds): an encoder that gives
// no access unit by then is stopped, and its hub's viewers get tiles,
// rather than stay on the last frame for good with the motion never
// ending (docs/performance.md: a live page that got nothing after a
// burst's last frame).
var encodeTimeout = 30 * time.Second

// h264KeySeconds is the most seconds of frames (at the encoder's rate)
// between key frames: a viewer that fell behind rejoins within ~2 s of
// motion.
const h264KeySeconds = 2

// maxEncoderFPS is the most screens a second an encoder may be told of: a
// hub's fastest pace (videoFrame).
const maxEncoderFPS = int(time.Second / videoFrame)

// encoder is one x264 process (GStreamer's gst-launch-1.0, of
// gstreamer1.0-tools, with x264enc of -plugins-ugly, rawvideoparse and
// videoconvert of -base and multipartmux of -good) fed whole screens (R, G, B, X bytes, as the
// hub keeps them) on its stdin; each screen comes back as one access unit.
// The screen's sides are padded to even (4:2:0 cannot code an odd side);
// the viewer crops the decoded frame to the rectangle. Its first frame is
// a key frame: a new process is how the hub makes one on demand.
type encoder struct {
	w, h   int // the screen's size
	pw, ph int // the encoded size, even
	fps    int // the frame rate it was told: its bitrate's
	in     io.WriteCloser
	out    *bufio.Reader
	kill   func()       // stops the encoder at once
	reap   func() error // waits for it once killed
	pid    int          // its process's, when it runs here
	stderr bytes.Buffer
	split  annexB
	pad    []byte
	wait   sync.Once
	err    error
}

// h264Pipeline is the gst-launch pipeline for a pw×ph screen at fps
// screens a second (h264Bitrate a second at that rate).
func h264Pipeline(pw, ph, fps int) []string {
	p := fmt.Sprintf("fdsrc fd=0 blocksize=%d ! rawvideoparse format=rgbx width=%d height=%d framerate=%d/1 ! "+
		"videoconvert ! video/x-raw,format=I420 ! "+
		"x264enc tune=zerolatency speed-preset=ultrafast bframes=0 aud=false threads=1 sliced-threads=false "+
		"key-int-max=%d bitrate=%d vbv-buf-capacity=300 ! "+
		"video/x-h264,profile=constrained-baseline,stream-format=byte-stream,alignment=au ! "+
		"multipartmux boundary=au ! fdsink fd=1 sync=false", pw*ph*4, pw, ph, fps, h264KeySeconds*fps, h264Bitrate)
	return append([]string{"-q", "-e"}, strings.Fields(p)...)
}

// startEncoder starts an encoder for a w×h screen encoded at most fps
// times a second: program's process, or one of the encoder service at PATH
// when program is "unix:PATH" (ServeEncoders).
func startEncoder(ctx context.Context, program string, w, h, fps int) (*encoder, error) {
	if w <= 0 || h <= 0 || w > maxDimension || h > maxDimension {
		return nil, fmt.Errorf("rfb: no H.264 for a %dx%d screen", w, h)
	}
	if fps < 1 || fps > maxEncoderFPS {
		return nil, fmt.Errorf("rfb: no H.264 at %d frames a second: 1 to %d", fps, maxEncoderFPS)
	}
	e := &encoder{w: w, h: h, pw: w + w%2, ph: h + h%2, fps: fps}
	if path, ok := strings.CutPrefix(program, "unix:"); ok {
		return e, e.dial(ctx, path)
	}
	cmd := exec.CommandContext(ctx, program, h264Pipeline(e.pw, e.ph, fps)...)
	cmd.Stderr = &e.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rfb: start the H.264 encoder: %w", err)
	}
	e.in, e.out = in, bufio.NewReaderSize(out, 64<<10)
	e.pid = cmd.Process.Pid
	e.kill = func() { cmd.Process.Kill() }
	e.reap = func() error {
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil // killed: it was asked to go
		}
		return err
	}
	return e, nil
}

// encode feeds one screen, w×h pixels of 4 bytes, and returns its access
// unit. It is not safe for concurrent use.
func (e *encoder) encode(pix []byte) (accessUnit, error) {
	if len(pix) != e.w*e.h*4 {
		return accessUnit{}, fmt.Errorf("rfb: a screen of %d bytes for a %dx%d encoder", len(pix), e.w, e.h)
	}
	var hung atomic.Bool
	t := time.AfterFunc(encodeTimeout, func() { hung.Store(true); e.kill() })
	defer t.Stop()
	err := e.feed(pix)
	var b []byte
	if err == nil {
		b, err = e.readPart()
	}
	if hung.Load() {
		err = fmt.Errorf("no access unit within %s, so it was stopped", encodeTimeout)
	}
	if err != nil {
		return accessUnit{}, e.failed(err)
	}
	return e.split.check(b)
}

// feed writes pix, padded to the encoded size, to the encoder.
func (e *encoder) feed(pix []byte) error {
	if e.pw == e.w && e.ph == e.h {
		_, err := e.in.Write(pix)
		return err
	}
	row := e.w * 4
	if e.pad == nil {
		e.pad = make([]byte, e.pw*e.ph*4)
	}
	for y := 0; y < e.h; y++ {
		copy(e.pad[y*e.pw*4:], pix[y*row:(y+1)*row])
	}
	_, err := e.in.Write(e.pad)
	return err
}

// readPart reads one part of multipartmux's stream: its headers, which
// must give the Content-Length, then that many bytes.
func (e *encoder) readPart() ([]byte, error) {
	n := -1
	for {
		line, err := e.out.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if len(line) > 200 {
			return nil, protocolErr("a line of %d bytes in the encoder's stream", len(line))
		}
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			if n, err = strconv.Atoi(v); err != nil || n < 0 || n > maxAccessUnit {
				return nil, protocolErr("the encoder's part length %q", v)
			}
		}
		if line == "" && n >= 0 {
			break
		}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(e.out, b); err != nil {
		return nil, err
	}
	return b, nil
}

// failed returns err with what the encoder said on its way out.
func (e *encoder) failed(err error) error {
	e.close()
	if s := strings.TrimSpace(e.stderr.String()); s != "" {
		err = fmt.Errorf("%w (%s)", err, s)
	}
	return fmt.Errorf("rfb: H.264 encoder: %w", err)
}

// close ends the encoder and waits for its process.
func (e *encoder) close() error {
	e.wait.Do(func() {
		e.in.Close()
		e.kill()
		e.err = e.reap()
	})
	return e.err
}

// CheckH264 returns nil when program encodes H.264 as the hubs run it:
// one small screen through the whole pipeline comes back as a key frame.
// Otherwise the error says why, with what the program wrote (GStreamer
// names an element it lacks: `no element "x264enc"`).
func CheckH264(ctx context.Context, program string) error {
	const w, h = 64, 48
	e, err := startEncoder(ctx, program, w, h, maxEncoderFPS)
	if err != nil {
		return err
	}
	defer e.close()
	au, err := e.encode(make([]byte, w*h*4))
	if err != nil {
		return err
	}
	if !au.key {
		return errors.New("rfb: the H.264 encoder's first frame is not a key frame")
	}
	return nil
}
