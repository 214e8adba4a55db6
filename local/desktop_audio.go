package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Sound on a session desktop: each desktop runs its own PulseAudio, as the
// desktop's user and sandboxed like its other processes, with one null
// sink ("corral") that its programs play into (PULSE_SERVER in their
// environment names its socket, in the member's private folder). For a
// listener the portal starts a GStreamer pipeline (pulsesrc, opusenc,
// oggmux) the same way, inside the desktop's sandbox, and reads Ogg Opus
// from its stdout: media is encoded where the desktop runs, and the portal
// only cuts the stream into packets. (opus-tools' opusenc holds 2.5 s of
// input before its first page, far too late for live sound.)

const (
	audioServer     = "pulseaudio" // process and log name
	audioSocketName = "pulse.sock"
	// AudioSink is the sink a desktop's programs play into; tests load a
	// tone into it.
	AudioSink = "corral"
	// AudioFrame is the length of one Opus packet the desktop sends.
	AudioFrame = 20 * time.Millisecond
)

// audioDeps lists what sound needs; without it a desktop has no sound.
var audioDeps = []struct{ bin, pkg string }{
	{"pulseaudio", "pulseaudio"},
	{"gst-launch-1.0", "gstreamer1.0-tools"},
	{"gst-inspect-1.0", "gstreamer1.0-tools"},
}

// audioElements are the GStreamer elements the encoder needs and the
// Debian package that ships each.
var audioElements = []struct{ name, pkg string }{
	{"pulsesrc", "gstreamer1.0-pulseaudio"},
	{"opusenc", "gstreamer1.0-plugins-base"},
	{"oggmux", "gstreamer1.0-plugins-base"},
}

// checkAudioElements reports, once per process, a missing element.
var checkAudioElements = sync.OnceValue(func() error {
	bins, err := lookAudio()
	if err != nil {
		return err
	}
	for _, e := range audioElements {
		if exec.Command(bins["gst-inspect-1.0"], "--exists", e.name).Run() != nil {
			return fmt.Errorf("GStreamer has no %s: install the Debian package %s", e.name, e.pkg)
		}
	}
	return nil
})

// lookAudio returns the path of each program sound needs, or an error
// naming the Debian packages to install.
func lookAudio() (map[string]string, error) {
	paths := map[string]string{}
	for _, d := range audioDeps {
		p, err := exec.LookPath(d.bin)
		if err != nil {
			return nil, fmt.Errorf("%s not found: install the Debian package %s", d.bin, d.pkg)
		}
		paths[d.bin] = p
	}
	return paths, nil
}

// audioSocket is the sound server's socket in the member's folder.
func (d *Desktop) audioSocket() string { return filepath.Join(d.spec.Dir, audioSocketName) }

// soundServer returns the desktop's sound server (pulseaudio), for
// startServers; its err says why the desktop has none.
func (d *Desktop) soundServer() *server {
	s := &server{name: audioServer, what: "sound", cwd: d.spec.Home, sock: d.audioSocket()}
	bins, err := lookAudio()
	if err == nil {
		err = checkAudioElements()
	}
	if err == nil {
		if err = os.Remove(s.sock); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		s.err = err
		return s
	}
	s.bin = bins["pulseaudio"]
	s.args = []string{
		"--daemonize=no", "--system=no", "--use-pid-file=no", "--exit-idle-time=-1",
		"--disable-shm=yes", // no memfd or /dev/shm shared with clients: the socket only
		"-n",                // no default.pa: only the modules below
		"--log-target=stderr",
		"-L", "module-native-protocol-unix socket=" + s.sock + " auth-anonymous=1",
		"-L", "module-null-sink sink_name=" + AudioSink + " rate=48000 sink_properties=device.description=Desktop",
	}
	s.env = append(d.Env(), "XDG_RUNTIME_DIR="+d.spec.Dir)
	return s
}

// HasAudio reports whether the desktop's sound server runs.
func (d *Desktop) HasAudio() bool {
	for _, p := range d.procs {
		if p.Name == audioServer && p.alive() {
			return true
		}
	}
	return false
}

// audioStream is the Ogg Opus output of one encoder of a desktop; Close
// ends it.
type audioStream struct {
	io.Reader
	cmd  *exec.Cmd
	once sync.Once
}

// Close implements io.Closer.
func (s *audioStream) Close() error {
	s.once.Do(func() {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // its own process group
		s.cmd.Wait()
	})
	return nil
}

// Audio starts encoding what the desktop's sink plays and returns the Ogg
// Opus stream: 48 kHz stereo, 20 ms packets, each page sent at once, with
// 20 ms of capture buffer.
func (d *Desktop) Audio(ctx context.Context) (io.ReadCloser, error) {
	if !d.HasAudio() {
		return nil, errors.New("the desktop's sound server is not running")
	}
	bins, err := lookAudio()
	if err != nil {
		return nil, err
	}
	env := append(d.Env(), "XDG_RUNTIME_DIR="+d.spec.Dir)
	cmd := d.spec.User.command(bins["gst-launch-1.0"], "-q",
		"pulsesrc", "device="+AudioSink+".monitor", "buffer-time=20000", "latency-time=10000", "!",
		"audio/x-raw,rate=48000,channels=2", "!",
		"opusenc", "frame-size=20", "bitrate=96000", "!",
		"oggmux", "max-delay=0", "max-page-delay=0", "!",
		"fdsink", "fd=1", "sync=false")
	cmd.Dir = d.spec.Home
	d.spec.User.setEnv(cmd, env)
	cmd.SysProcAttr = d.spec.User.sysProcAttr(&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the sound encoder: %w", err)
	}
	return &audioStream{Reader: out, cmd: cmd}, nil
}
