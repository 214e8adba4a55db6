package testcluster_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestKubelet runs Pods on the stand-in kubelet: bound to its Node,
// reported by image, exec through the apiserver over SPDY (what kubectl
// before 1.30 and client-go's SPDY executor speak; websockets are tested
// in kube/), deleted gracefully.
func TestKubelet(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	k := c.StartKubelet(t)
	ns := c.Namespace(t)
	node, err := c.Client.CoreV1().Nodes().Get(ctx, k.Node, metav1.GetOptions{})
	if err != nil || node.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Fatalf("Node %s: %+v, %v; want one with a kubelet port", k.Node, node, err)
	}
	pods := c.Client.CoreV1().Pods(ns)
	for name, image := range map[string]string{"ok": "corral.test/shell", "crash": testcluster.ImageCrashLoop, "pull": testcluster.ImagePullFails} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}}}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status := func(name string) *corev1.Pod {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Status.StartTime != nil {
				return pod
			}
			if time.Now().After(deadline) {
				t.Fatalf("Pod %s has no status after 10s: %+v", name, pod)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if pod := status("ok"); pod.Spec.NodeName != k.Node || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		t.Errorf("Pod ok: node %q, phase %s, IP %q; want Running on %s with an IP", pod.Spec.NodeName, pod.Status.Phase, pod.Status.PodIP, k.Node)
	}
	if w := status("crash").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
		t.Errorf("Pod of %s waits with %+v; want CrashLoopBackOff", testcluster.ImageCrashLoop, w)
	}
	if w := status("pull").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ImagePullBackOff" {
		t.Errorf("Pod of %s waits with %+v; want ImagePullBackOff", testcluster.ImagePullFails, w)
	}

	exec := func(tty bool, cmd ...string) remotecommand.Executor {
		u := c.Client.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("ok").SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "main", Command: cmd, Stdin: tty, Stdout: true, Stderr: !tty, TTY: tty}, scheme.ParameterCodec).URL()
		exec, err := remotecommand.NewSPDYExecutor(c.Config, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		return exec
	}
	// An interactive shell, as kubectl exec -it: output is read while the
	// session lasts. (An SPDY client may lose the output of a command that
	// ends at once: spdystream drops data frames of a stream that closes
	// before its reader starts.)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- exec(true, "sh").StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Tty: true})
		outW.Close()
	}()
	if _, err := io.WriteString(inW, `echo "home=$HOME"`+"\n"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 1024)
	for !bytes.Contains(got, []byte("home=/")) {
		n, err := outR.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("tty exec over SPDY: %q, then %v; want the Pod's HOME", got, err)
		}
	}
	inW.Close() // hangs up the shell
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil {
		t.Errorf("tty exec over SPDY ended with %v; want nil once its stdin closed", err)
	}
	err = exec(false, "sh", "-c", "exit 3").StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	if ee, ok := err.(utilexec.ExitError); !ok || ee.ExitStatus() != 3 {
		t.Errorf("exec of exit 3: %v; want exit status 3", err)
	}

	if err := pods.Delete(ctx, "ok", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := pods.Get(ctx, "ok", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pod ok still there 10s after a graceful delete: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
