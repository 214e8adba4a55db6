package testcluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The kubelet's restart back-off for a container that exits
// (pkg/kubelet/kubelet.go, MaxContainerBackOff; the initial 10 s in
// pkg/kubelet/kuberuntime): it doubles with each quick exit up to five
// minutes, and starts over once the container ran ten minutes.
const (
	restartFirst  = 10 * time.Second
	restartMax    = 5 * time.Minute
	restartForget = 10 * time.Minute
)

// component is one of KubeVirt's control plane processes, run as its
// Deployment's Pod is: restarted when it exits, after the kubelet's
// back-off. virt-controller exits on purpose when it loses its leader
// Lease (pkg/virt-controller/watch/application.go, OnStoppedLeading:
// "leaderelection lost"), which an API server too slow to answer its
// renewal within 10 s makes happen; a cluster restarts it, and so does
// this.
type component struct {
	name, path string
	args       []string
	log        *os.File
	dir        string

	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
	stop     chan struct{} // closed by KubeVirt.stop, under mu
	done     chan struct{} // closed when the supervisor ends
}

// run starts a component with its output in a log file of its own, and
// supervises it (see component).
func (kv *KubeVirt) run(tb testing.TB, path string, args ...string) {
	tb.Helper()
	name := filepath.Base(path)
	out, err := os.Create(filepath.Join(kv.dir, name+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	c := &component{name: name, path: path, args: args, log: out, dir: kv.dir, stop: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	err = c.start()
	c.mu.Unlock()
	if err != nil {
		tb.Fatalf("testcluster: start %s: %v", name, err)
	}
	if kv.comps == nil {
		kv.comps = map[string]*component{}
	}
	kv.comps[name] = c
	go c.supervise()
}

// start runs the component's process once; c.mu is held, so that stop
// signals either this process or none started after it.
func (c *component) start() error {
	cmd := exec.Command(c.path, c.args...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd = cmd
	return nil
}

// supervise waits for the process and starts it again after the back-off,
// until stop.
func (c *component) supervise() {
	defer close(c.done)
	quick := 0
	for {
		c.mu.Lock()
		cmd := c.cmd
		c.mu.Unlock()
		began := time.Now()
		err := cmd.Wait()
		if time.Since(began) >= restartForget {
			quick = 0
		}
		delay := min(restartFirst<<quick, restartMax)
		quick = min(quick+1, 8)
		select {
		case <-c.stop:
			return
		default:
		}
		fmt.Fprintf(c.log, "\ntestcluster: %s exited (%v) after %v; restarting it in %v, as the kubelet would\n", c.name, err, time.Since(began).Round(time.Second), delay)
		fmt.Fprintf(os.Stderr, "testcluster: %s exited (%v); restarting it in %v\n", c.name, err, delay)
		select {
		case <-c.stop:
			return
		case <-time.After(delay):
		}
		c.mu.Lock()
		select {
		case <-c.stop:
			c.mu.Unlock()
			return
		default:
		}
		c.restarts++
		err = c.start()
		c.mu.Unlock()
		if err != nil {
			fmt.Fprintf(c.log, "testcluster: restart %s: %v\n", c.name, err)
			return
		}
	}
}

// signal sends sig to the component's current process group.
func (c *component) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return syscall.Kill(-c.cmd.Process.Pid, sig)
}

// Restarts returns how often component name (virt-api, virt-controller,
// snapshot-controller, kube-controller-manager) was started again after
// it exited.
func (kv *KubeVirt) Restarts(name string) int {
	c := kv.comps[name]
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// Kill ends component name's process with SIGKILL, as an OOM kill or a
// crash would; it is started again after the kubelet's back-off.
func (kv *KubeVirt) Kill(tb testing.TB, name string) {
	tb.Helper()
	if err := kv.comps[name].signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("testcluster: kill %s: %v", name, err)
	}
}

// FreezeVirtAPI makes virt-api stop answering, as a hung or overloaded
// virt-api does: its webhooks (every VM write) and subresources (start,
// stop, consoles) time out, while connections to it still open. ThawVirtAPI
// lets it answer again; so does the end of tb.
func (kv *KubeVirt) FreezeVirtAPI(tb testing.TB) {
	tb.Helper()
	if err := kv.comps["virt-api"].signal(syscall.SIGSTOP); err != nil {
		tb.Fatalf("testcluster: freeze virt-api: %v", err)
	}
	tb.Cleanup(kv.ThawVirtAPI)
}

// ThawVirtAPI undoes FreezeVirtAPI.
func (kv *KubeVirt) ThawVirtAPI() {
	_ = kv.comps["virt-api"].signal(syscall.SIGCONT)
}

// Log returns the output of a component so far (virt-api,
// virt-controller, snapshot-controller, kube-controller-manager), each of
// its runs.
func (kv *KubeVirt) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(kv.dir, name+".log"))
	return string(b)
}

// Tail is the last n lines of a component's log, for a failure message,
// without cert-manager's noise (virt-controller logs each certificate it
// reads again, several lines a second).
func (kv *KubeVirt) Tail(name string, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(kv.Log(name))))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "cert-manager.go") {
			lines = append(lines, sc.Text())
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop ends the guests a migration handed over and every component, with
// SIGTERM, then SIGKILL after 5 s.
func (kv *KubeVirt) stop() {
	kv.mu.Lock()
	for _, g := range kv.migrating {
		g.stop()
	}
	kv.migrating = nil
	kv.mu.Unlock()
	for _, c := range kv.comps {
		c.mu.Lock()
		close(c.stop)
		c.mu.Unlock()
		_ = c.signal(syscall.SIGCONT) // a frozen virt-api too
		_ = c.signal(syscall.SIGTERM)
	}
	for _, c := range kv.comps {
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.signal(syscall.SIGKILL)
			<-c.done
		}
		c.log.Close()
	}
}
