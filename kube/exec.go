package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ExecPath reaches a CT member's terminal through the apiserver: a tty
// shell opened with pods/exec in the member's container, running the
// pool's shell command (AnnotationShell on the Pod; /bin/sh when absent).
// It speaks websockets (v5.channel.k8s.io) and falls back to SPDY when the
// apiserver or a proxy in front of it refuses the websocket upgrade. It is
// a relay path after the direct one (handlers.ConsolePath); its name is
// recorded on sessions as "apiserver".
type ExecPath struct {
	cfg *rest.Config
	cs  kubernetes.Interface
}

// NewExecPath returns an ExecPath over cfg.REST; its identity needs get
// and create on pods/exec, and get on pods.
func NewExecPath(cfg Config) (*ExecPath, error) {
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kube: exec client: %w", err)
	}
	return &ExecPath{cfg: cfg.REST, cs: cs}, nil
}

// Name returns PathAPIServer, the path recorded on sessions.
func (e *ExecPath) Name() string { return PathAPIServer }

// Dial opens a terminal in member ref's Pod. The stream it returns
// takes resizes (Resize(cols, rows), the size reaches the pty through the exec's
// resize channel). Protocols other than terminal, and members that are
// not Pods (VMs), fail with a plain error so that a caller tries on.
func (e *ExecPath) Dial(ctx context.Context, ref vdi.Ref, proto vdi.Protocol) (net.Conn, error) {
	if proto != vdi.ProtocolTerminal {
		return nil, fmt.Errorf("kube: pods/exec gives a terminal, not a %s console", proto)
	}
	pod, err := e.cs.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kube: %s has no Pod (not a container desktop, or stopped)", ref)
	} else if err != nil {
		return nil, fmt.Errorf("kube: get Pod %s: %w", ref, err)
	}
	if pod.Labels[vdi.LabelPool] == "" {
		return nil, fmt.Errorf("kube: Pod %s is in no pool", ref)
	}
	container := pod.Spec.Containers[0].Name
	for _, c := range pod.Spec.Containers {
		if c.Name == ctContainer {
			container = c.Name
		}
	}
	shell := defaultShell
	if s := pod.Annotations[AnnotationShell]; s != "" {
		var cmd []string
		if err := json.Unmarshal([]byte(s), &cmd); err == nil && len(cmd) > 0 {
			shell = cmd
		}
	}
	u := e.cs.CoreV1().RESTClient().Post().Namespace(ref.Namespace).Resource("pods").Name(ref.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: shell, Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec).URL()
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("kube: exec into %s: %w", ref, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("kube: exec into %s: %w", ref, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("kube: exec into %s: %w", ref, err)
	}
	return startExec(ctx, ref, exec)
}

// execConn is an exec session as a net.Conn: reads come from one end of a
// net.Pipe whose other end is the session's stdout (so read deadlines
// work; write deadlines do not apply), writes go to its stdin, and resizes
// to its resize queue.
type execConn struct {
	net.Conn
	stdin     *io.PipeWriter
	sizes     chan remotecommand.TerminalSize
	connected chan struct{} // closed when the streams are up
	closed    chan struct{} // closed by Close
	done      chan struct{} // closed when the session has ended
	cancel    context.CancelFunc

	connectOnce, closeOnce sync.Once
	first                  bool // Next has returned the initial size
}

var _ net.Conn = (*execConn)(nil)

// initialSize is the terminal's size until the client sends its own.
var initialSize = remotecommand.TerminalSize{Width: 80, Height: 24}

// startExec runs exec in the background and returns once its streams are
// up, or with the error that kept them from coming up (ctx bounds that
// wait; the session itself lasts until Close).
func startExec(ctx context.Context, ref vdi.Ref, exec remotecommand.Executor) (*execConn, error) {
	mine, theirs := net.Pipe()
	inR, inW := io.Pipe()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &execConn{Conn: mine, stdin: inW, sizes: make(chan remotecommand.TerminalSize, 8), connected: make(chan struct{}),
		closed: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	var streamErr error
	go func() {
		defer close(c.done)
		streamErr = exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: theirs, Tty: true, TerminalSizeQueue: c})
		theirs.Close()
		inR.Close()
	}()
	select {
	case <-c.connected:
		return c, nil
	case <-c.done:
		c.Close()
		if streamErr == nil {
			streamErr = errors.New("the session ended at once")
		}
		return nil, fmt.Errorf("kube: exec into %s: %w", ref, streamErr)
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("kube: exec into %s: %w", ref, context.Cause(ctx))
	}
}

// Next hands the exec its terminal sizes: the initial one, then each
// Resize; nil once closed. The exec first asks once its streams are up,
// which is how startExec knows they are.
func (c *execConn) Next() *remotecommand.TerminalSize {
	c.connectOnce.Do(func() { close(c.connected) })
	if !c.first {
		c.first = true
		s := initialSize
		return &s
	}
	select {
	case r := <-c.sizes:
		return &r
	case <-c.closed:
		return nil
	}
}

// Resize queues a new terminal size for the session; when sizes pile up
// faster than they are sent, the newest wins.
func (c *execConn) Resize(cols, rows uint16) error {
	r := remotecommand.TerminalSize{Width: cols, Height: rows}
	for {
		select {
		case c.sizes <- r:
			return nil
		case <-c.closed:
			return net.ErrClosed
		default:
			select {
			case <-c.sizes:
			default:
			}
		}
	}
}

// closeGrace is how long Close lets a session end by itself (its stdin
// closed, the shell hung up) before cutting the connection.
const closeGrace = 2 * time.Second

// Write types p into the session.
func (c *execConn) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close ends the session and waits until it has: stdin ends first, so the
// shell is hung up and the streams close in order (output meanwhile is
// dropped); only a session that lingers is cut.
func (c *execConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.stdin.Close()
		go io.Copy(io.Discard, c.Conn)
		select {
		case <-c.done:
		case <-time.After(closeGrace):
		}
		c.cancel()
		c.Conn.Close()
	})
	<-c.done
	return nil
}
