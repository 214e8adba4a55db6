package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// Images that make the stand-in kubelet report a failing container, so that
// tests see the statuses a real node reports for them.
const (
	// ImageCrashLoop is a container that keeps exiting: CrashLoopBackOff.
	ImageCrashLoop = "corral.test/crashloop"
	// ImagePullFails is an image no registry has: ImagePullBackOff.
	ImagePullFails = "corral.test/no-such-image"
)

// Kubelet is a TEST-ONLY stand-in for a node's kubelet (and, for its own
// node, the scheduler), so that Pods on the test apiserver run: the
// apiserver has no kubelet and Pods would stay Pending. It
//
//   - registers a Node whose InternalIP is 127.0.0.1 and whose kubelet port
//     is its own TLS server, which is how kube-apiserver finds a kubelet for
//     pods/exec (it does not verify a kubelet's certificate unless started
//     with --kubelet-certificate-authority, and the test apiserver is not);
//   - binds Pending, unbound Pods to that Node (several stand-ins may run:
//     the binding is atomic, one wins each Pod);
//   - reports its Pods Running and Ready with a pod IP of its own on the
//     loopback network, or failing for ImageCrashLoop and ImagePullFails;
//     no image is pulled and no container process runs;
//   - serves the kubelet's exec endpoint /exec/{ns}/{pod}/{container}
//     with k8s.io/cri-streaming's remotecommand server (SPDY, which the
//     apiserver speaks to a node that does not declare
//     ExtendWebSocketsToKubelet, and websockets): the command runs on this
//     machine, on a pty when asked, in a HOME of the Pod's own under a
//     temporary folder, so `sh` or `bash -l` are real shells; it counts
//     each Pod's exec sessions, and the most that ran at once (Execs);
//   - finishes deleting its Pods (grace period 0) once they are marked for
//     deletion, hanging up their exec sessions first.
type Kubelet struct {
	// Node is the name of the Node it registered.
	Node string

	cs   kubernetes.Interface
	srv  *httptest.Server
	root string // per-pod HOMEs

	pods cache.Indexer // the Pods the informer sees (fits)

	mu     sync.Mutex
	ips    map[types.UID]string
	nextIP int
	execs  map[string]map[*execSession]struct{} // ns/pod -> live exec sessions
	netns  map[types.UID]string                 // a Pod on a PodNetwork -> its network namespace
	counts map[string]ExecCounts                // ns/pod -> what its exec sessions did

	stop context.CancelFunc
	done chan struct{}
}

var kubeletSeq counter

// StartKubelet starts a stand-in kubelet stopped when tb ends.
func (c *Cluster) StartKubelet(tb testing.TB) *Kubelet {
	tb.Helper()
	k, err := NewKubelet(context.Background(), c.Config)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := k.Close(); err != nil {
			tb.Errorf("testcluster: stop the stand-in kubelet: %v", err)
		}
	})
	return k
}

// NewKubelet starts a stand-in kubelet with the cluster-admin config cfg
// and registers its Node; callers Close it.
func NewKubelet(ctx context.Context, cfg *rest.Config) (*Kubelet, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testcluster: kubelet client: %w", err)
	}
	root, err := os.MkdirTemp("", "corral-kubelet-")
	if err != nil {
		return nil, fmt.Errorf("testcluster: kubelet: %w", err)
	}
	n := kubeletSeq.next()
	// Pod IPs start at a random place: other test processes run kubelets
	// of their own, and a Node stand-in listens on its Pods' IPs.
	k := &Kubelet{Node: fmt.Sprintf("standin-%d-%d", os.Getpid(), n), cs: cs, root: root, nextIP: rand.IntN(60000),
		ips: map[types.UID]string{}, execs: map[string]map[*execSession]struct{}{}, counts: map[string]ExecCounts{},
		netns: map[types.UID]string{}, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", k.handleExec)
	k.srv = httptest.NewUnstartedServer(mux)
	k.srv.Config.ErrorLog = log.New(discard{}, "", 0) // TLS probes of a closing server
	k.srv.Listener.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("testcluster: kubelet: %w", err)
	}
	k.srv.Listener = ln
	k.srv.StartTLS()
	if err := k.register(ctx, int32(ln.Addr().(*net.TCPAddr).Port)); err != nil {
		k.srv.Close()
		os.RemoveAll(root)
		return nil, fmt.Errorf("testcluster: register the stand-in kubelet's Node: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.stop = cancel
	go k.loop(lctx)
	return k, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// register creates the Node with its address and kubelet port.
func (k *Kubelet) register(ctx context.Context, port int32) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.Node, Labels: map[string]string{"kubernetes.io/hostname": k.Node}}}
	made, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	made.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "TEST-ONLY stand-in kubelet", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	_, err = k.cs.CoreV1().Nodes().UpdateStatus(ctx, made, metav1.UpdateOptions{})
	return err
}

// Close stops the stand-in, hangs up its exec sessions, deletes its Node
// and the Pods' HOMEs.
func (k *Kubelet) Close() error {
	k.stop()
	<-k.done
	k.mu.Lock()
	for _, ss := range k.execs {
		for s := range ss {
			s.hangup()
		}
	}
	k.mu.Unlock()
	k.srv.Close()
	err := k.cs.CoreV1().Nodes().Delete(context.Background(), k.Node, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return errors.Join(err, os.RemoveAll(k.root))
}

// kubeletWorkers is how many Pods the stand-in brings along at once, as a
// node's kubelet works on its Pods in parallel: a storm of claims on 2
// cores should measure the portals and the apiserver, not a serial loop.
const kubeletWorkers = 8

// loop brings Pods to their state: a watch (an informer, resyncing every
// second so that a step that failed is tried again) feeds a queue that
// kubeletWorkers work through.
func (k *Kubelet) loop(ctx context.Context) {
	defer close(k.done)
	factory := informers.NewSharedInformerFactory(k.cs, time.Second)
	pods := factory.Core().V1().Pods().Informer()
	queue := workqueue.NewTyped[string]()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	k.pods = pods.GetIndexer()
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for range kubeletWorkers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if obj, ok, _ := pods.GetIndexer().GetByKey(key); ok {
					k.sync(ctx, obj.(*corev1.Pod).DeepCopy())
				}
				queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
}

// sync does the next step for one Pod: bind, report status, or delete.
func (k *Kubelet) sync(ctx context.Context, pod *corev1.Pod) {
	switch {
	case pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && k.fits(pod):
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: k.Node}}
		// A Conflict means another stand-in bound it first.
		k.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	case pod.Spec.NodeName != k.Node:
	case pod.DeletionTimestamp != nil:
		k.hangupPod(pod.Namespace + "/" + pod.Name)
		zero := int64(0)
		err := k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err == nil || apierrors.IsNotFound(err) {
			k.mu.Lock()
			delete(k.ips, pod.UID)
			k.mu.Unlock()
		}
	case pod.Status.StartTime == nil:
		pod.Status = k.status(pod)
		k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
}

// fits reports whether pod may run on this node by its required pod
// anti-affinity on kubernetes.io/hostname, as the scheduler keeps it (a
// live migration's target virt-launcher Pod keeps off the source's node
// so); other affinity is not played.
func (k *Kubelet) fits(pod *corev1.Pod) bool {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAntiAffinity == nil {
		return true
	}
	for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			return false
		}
		for _, o := range k.pods.List() {
			p := o.(*corev1.Pod)
			if p.Spec.NodeName == k.Node && p.Namespace == pod.Namespace && p.UID != pod.UID &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && sel.Matches(labels.Set(p.Labels)) {
				return false
			}
		}
	}
	return true
}

// status is what a kubelet would report for pod, by its first container's
// image (see ImageCrashLoop and ImagePullFails).
func (k *Kubelet) status(pod *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	k.mu.Lock()
	ip := k.ips[pod.UID]
	if ip == "" {
		// Each Pod its own loopback address, so that tests can listen on a
		// Pod's IP and port as a container would.
		k.nextIP++
		ip = fmt.Sprintf("127.1.%d.%d", k.nextIP/250%250, k.nextIP%250+2)
		k.ips[pod.UID] = ip
	}
	k.mu.Unlock()
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionTrue
		if !ok {
			s = corev1.ConditionFalse
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	st := corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now}
	ready := true
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "standin://" + c.Image}
		switch c.Image {
		case ImageCrashLoop:
			ready = false
			cs.RestartCount = 3
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 40s restarting failed container=%s pod=%s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)}
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: now}
		case ImagePullFails:
			ready = false
			st.Phase = corev1.PodPending
			st.PodIP, st.PodIPs = "", nil
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s: not found", c.Image, c.Image)}
		default:
			t := true
			cs.Ready, cs.Started = true, &t
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true),
		cond(corev1.ContainersReady, ready), cond(corev1.PodReady, ready)}
	return st
}

// handleExec serves /exec/{ns}/{pod}/{container}?command=...&input=1&tty=1
// as the kubelet does, through cri-streaming's remotecommand server.
func (k *Kubelet) handleExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	pod, err := k.cs.CoreV1().Pods(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != k.Node {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", ns, name, k.Node), http.StatusNotFound)
		return
	}
	cmd := r.URL.Query()["command"]
	remotecommandserver.ServeExec(w, r, &podExecutor{k: k, pod: pod}, ns+"/"+name, string(pod.UID), container, cmd, opts,
		4*time.Hour, 30*time.Second, remotecommandserver.SupportedStreamingProtocols)
}

func (k *Kubelet) track(key string, s *execSession) (untrack func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.execs[key] == nil {
		k.execs[key] = map[*execSession]struct{}{}
	}
	k.execs[key][s] = struct{}{}
	n := k.counts[key]
	n.Opened++
	n.MostAtOnce = max(n.MostAtOnce, len(k.execs[key]))
	k.counts[key] = n
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.execs[key], s)
		if len(k.execs[key]) == 0 {
			delete(k.execs, key)
		}
	}
}

// ExecCounts are what the exec sessions of one Pod did on a kubelet: how
// many it ran, how many run now, and the most that ran at once. A kubelet
// runs any number side by side (each its own shell): a test that wants
// one at a time reads MostAtOnce.
type ExecCounts struct{ Opened, Live, MostAtOnce int }

// Execs returns the counts of Pod namespace/name's exec sessions on this
// kubelet.
func (k *Kubelet) Execs(namespace, name string) ExecCounts {
	key := namespace + "/" + name
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.counts[key]
	n.Live = len(k.execs[key])
	return n
}

// hangupPod ends every exec session of the Pod ns/name.
func (k *Kubelet) hangupPod(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for s := range k.execs[key] {
		s.hangup()
	}
}

// home returns the Pod's HOME, made on first use.
func (k *Kubelet) home(pod *corev1.Pod) (string, error) {
	dir := k.root + "/" + pod.Namespace + "_" + pod.Name + "_" + string(pod.UID)
	return dir, os.MkdirAll(dir, 0o700)
}
