package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TEST-ONLY: faults for the soak (soak/): the cluster's processes found by
// their command lines, so a test can pause etcd or restart the apiserver
// with the very same flags and certificates (envtest's own Stop/Start would
// make new certificates, and every kubeconfig handed out would break).

// EtcdPID returns the process id of the cluster's etcd.
func (c *Cluster) EtcdPID() (int, error) {
	return findProc(filepath.Join(BinDir(), "etcd"), "--data-dir="+c.env.ControlPlane.Etcd.DataDir)
}

// APIServerPID returns the process id of the cluster's kube-apiserver.
func (c *Cluster) APIServerPID() (int, error) {
	c.mu.Lock()
	restarted := c.restarted
	c.mu.Unlock()
	if restarted != nil {
		return restarted.Process.Pid, nil
	}
	return findProc(filepath.Join(BinDir(), "kube-apiserver"), "--etcd-servers="+c.env.ControlPlane.Etcd.URL.String())
}

// RestartAPIServer stops the kube-apiserver (SIGTERM, then SIGKILL after
// 20 s), waits down before it starts the same binary with the same
// arguments again; it does not wait for the new one to be ready. Stop
// ends the restarted process.
func (c *Cluster) RestartAPIServer(down time.Duration) error {
	pid, err := c.APIServerPID()
	if err != nil {
		return err
	}
	argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("testcluster: read the apiserver's command line: %w", err)
	}
	args := strings.Split(strings.TrimRight(string(argv), "\x00"), "\x00")
	syscall.Kill(pid, syscall.SIGTERM)
	for end := time.Now().Add(20 * time.Second); alive(pid) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(down)
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testcluster: start the apiserver again: %w", err)
	}
	go cmd.Wait()
	c.mu.Lock()
	c.restarted = cmd
	c.mu.Unlock()
	return nil
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// findProc returns the one process running bin with arg among its arguments.
func findProc(bin, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(argv, []byte(bin+"\x00")) {
			continue
		}
		if bytes.Contains(argv, []byte("\x00"+arg+"\x00")) || bytes.HasSuffix(argv, []byte("\x00"+arg)) ||
			bytes.Contains(argv, []byte("\x00"+arg+"\x00")) {
			if alive(pid) {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("testcluster: no running %s with %s", filepath.Base(bin), arg)
}
