package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/procgroup"
	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// podExecutor runs exec commands of one Pod on this machine: the stand-in
// kubelet has no containers, so the command's image is not used, only its
// name and arguments, in the Pod's HOME.
type podExecutor struct {
	k   *Kubelet
	pod *corev1.Pod
}

// execSession is one running exec command.
type execSession struct {
	lead   *procgroup.Leader // set once the command has started
	once   sync.Once
	hungup atomic.Bool
}

// hangup kills the command and everything it started (its own process
// group), as a container runtime would when the container goes. A command
// that has been reaped is left alone: its process group ID may have been
// given to another process since (pid_max is 32768 on many machines).
func (s *execSession) hangup() {
	s.once.Do(func() {
		s.hungup.Store(true)
		s.lead.Signal(syscall.SIGKILL)
	})
}

// wait waits for the command and reaps it.
func (s *execSession) wait() error {
	return s.lead.Wait()
}

// ExecInContainer runs cmd with the Pod's HOME, on a pty when tty is set,
// copying in, out and errw; the command is hung up when in ends (the
// client went away) or the Pod is deleted.
func (e *podExecutor) ExecInContainer(ctx context.Context, name, uid, container string, cmd []string, in io.Reader, out, errw io.WriteCloser,
	tty bool, resize <-chan remotecommandserver.TerminalSize, timeout time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command to run")
	}
	home, err := e.k.home(e.pod)
	if err != nil {
		return err
	}
	// On a PodNetwork the command runs in the Pod's network namespace.
	cmd = append(e.k.execPrefix(e.pod.UID), cmd...)
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Dir = home
	c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "HOSTNAME=" + e.pod.Name, "USER=" + os.Getenv("USER")}
	s := &execSession{}
	if !tty {
		c.Stdin, c.Stdout, c.Stderr = in, out, errw
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.lead = procgroup.Lead(c)
		defer e.k.track(name, s)()
		err := s.wait()
		// Close the streams once all output is written, as a runtime does
		// when the process's pipes end.
		closeStreams(out, errw)
		return s.end(err)
	}
	c.Env = append(c.Env, "TERM=xterm")
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer ptmx.Close()
	s.lead = procgroup.Lead(c)
	defer e.k.track(name, s)()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sz, ok := <-resize:
				if !ok {
					return
				}
				pty.Setsize(ptmx, &pty.Winsize{Cols: sz.Width, Rows: sz.Height})
			case <-done:
				return
			}
		}
	}()
	if in != nil {
		go func() {
			io.Copy(ptmx, in)
			s.hangup()
		}()
	}
	io.Copy(out, ptmx) // until the pty has no writer left (EIO)
	err = s.wait()
	closeStreams(out, errw)
	return s.end(err)
}

// closeStreams ends the output streams, after the last byte.
func closeStreams(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			w.Close()
		}
	}
}

// end turns the command's exit status into the error the remotecommand
// server reports as an exit code; a session hung up (the client left) ended
// as it should.
func (s *execSession) end(err error) error {
	if s.hungup.Load() {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}
