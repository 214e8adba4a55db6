package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctGracePeriod is how long a member's container has to end after SIGTERM.
// A desktop container keeps nothing, and releases wait for the old Pod to
// go before a fresh one takes its name, so the grace is short.
const ctGracePeriod = 10

// podFor is the Pod of member name, made from its pool's ConfigMap.
func podFor(p *ctPool, name string) *corev1.Pod {
	shell, _ := json.Marshal(p.shell)
	no := false
	grace := int64(ctGracePeriod)
	c := corev1.Container{Name: ctContainer, Image: p.Source, Command: p.command, Resources: p.resources,
		// A terminal with nothing attached keeps an image whose command is
		// a shell running, as `docker run -it` would.
		Stdin: true, TTY: true}
	if p.terminalPort > 0 {
		c.Ports = []corev1.ContainerPort{{Name: "terminal", ContainerPort: p.terminalPort, Protocol: corev1.ProtocolTCP}}
	}
	c.SecurityContext = &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: &no,
	}
	pod := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if p.runAsUser > 0 {
		yes := true
		pod.RunAsUser, pod.RunAsGroup, pod.RunAsNonRoot = &p.runAsUser, &p.runAsUser, &yes
	}
	labels := map[string]string{vdi.LabelPool: p.Name}
	if p.Policy.Network == vdi.NetworkOutbound {
		labels[LabelEgress] = string(vdi.NetworkOutbound)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name,
			Labels:      labels,
			Annotations: map[string]string{AnnotationShell: string(shell)},
			// On a cluster with a garbage collector, deleting the ConfigMap
			// deletes the Pods too.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: p.cm.Name, UID: p.cm.UID}},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			Hostname:                      name,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               pod,
		},
	}
}

// createPod makes member name's Pod from its pool.
func (c *CTs) createPod(ctx context.Context, p *ctPool, name string) error {
	_, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, podFor(p, name), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return &vdi.Error{Code: vdi.EConflict, Err: err, Hint: "Wait for it to stop, then try again.",
			Msg: fmt.Sprintf("Desktop %s/%s is still being stopped.", p.Namespace, name)}
	} else if err != nil {
		return fmt.Errorf("kube: create Pod %s/%s of CT pool %s: %w", p.Namespace, name, p.Name, err)
	}
	return nil
}

// deletePod deletes the Pod ref with uid and waits until it is gone.
func (c *CTs) deletePod(ctx context.Context, ref vdi.Ref, uid types.UID) error {
	err := c.cs.CoreV1().Pods(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kube: delete Pod %s: %w", ref, err)
	}
	return c.waitGone(ctx, ref, uid)
}

// waitGone waits until the Pod ref with uid no longer exists.
func (c *CTs) waitGone(ctx context.Context, ref vdi.Ref, uid types.UID) error {
	err := c.untilPod(ctx, PowerTimeout, ref, func(pod *corev1.Pod) (bool, error) {
		return pod == nil || pod.UID != uid, nil
	})
	if err != nil {
		return fmt.Errorf("kube: Pod %s still there after deleting it (is its node up?): %w", ref, err)
	}
	return nil
}

// Start makes the member's Pod when there is none (or it ended) and waits
// until it is running and ready; a Pod that cannot run ends the wait with
// the reason.
func (c *CTs) Start(ctx context.Context, ref vdi.Ref) error {
	if err := c.AskStart(ctx, ref); err != nil {
		return err
	}
	return c.waitRunning(ctx, ref)
}

// AskStart makes the member's Pod (vdi.StartAsker) and returns without
// waiting for it to run: pulling an image can take minutes.
func (c *CTs) AskStart(ctx context.Context, ref vdi.Ref) error {
	p, pod, err := c.member(ctx, ref)
	if err != nil {
		return err
	}
	err = c.startPod(ctx, p, ref, pod)
	if apierrors.IsAlreadyExists(err) {
		// A Pod the cache has not seen yet (another replica made it just
		// now): go on from the API server's word.
		live, gerr := c.cs.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			live = nil // gone again meanwhile
		case gerr != nil:
			return fmt.Errorf("kube: get Pod %s: %w", ref, gerr)
		case live.Labels[vdi.LabelPool] != p.Name:
			return notMemberPod(ref, p)
		}
		err = c.startPod(ctx, p, ref, live)
	}
	return err
}

// startPod makes sure member ref of p has a Pod that is not ending, given
// pod, the Pod as last read (nil when there was none): it waits for one
// being deleted to go, replaces one that ended and makes one where there
// is none. AlreadyExists means a Pod was made since pod was read.
func (c *CTs) startPod(ctx context.Context, p *ctPool, ref vdi.Ref, pod *corev1.Pod) error {
	if pod != nil && pod.DeletionTimestamp != nil {
		if err := c.waitGone(ctx, ref, pod.UID); err != nil {
			return err
		}
		pod = nil
	}
	if pod != nil && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) {
		// A Pod that ended never runs again: make a new one.
		if err := c.deletePod(ctx, ref, pod.UID); err != nil {
			return err
		}
		pod = nil
	}
	if pod == nil {
		return c.createPod(ctx, p, ref.Name)
	}
	return nil
}

// waitRunning waits on the member's Pod until it runs (PowerTimeout).
func (c *CTs) waitRunning(ctx context.Context, ref vdi.Ref) error {
	p, err := c.owner(ctx, ref)
	if err != nil {
		return err
	}
	var m vdi.Member
	err = c.untilPod(ctx, PowerTimeout, ref, func(pod *corev1.Pod) (bool, error) {
		m = ctMemberOf(p, ref.Name, pod)
		if m.Power == vdi.PowerFailed {
			return false, fmt.Errorf("kube: start %s: %s", ref, m.Reason)
		}
		return m.Power == vdi.PowerRunning, nil
	})
	if err != nil && m.Power != vdi.PowerFailed && ctx.Err() == nil {
		return fmt.Errorf("kube: start %s: still %s: %w", ref, m.Power, err)
	}
	return err
}

// Stop deletes the member's Pod and waits until it is gone: a container
// keeps nothing, the next Start makes a new one.
func (c *CTs) Stop(ctx context.Context, ref vdi.Ref) error {
	_, pod, err := c.member(ctx, ref)
	if err != nil || pod == nil {
		return err
	}
	return c.deletePod(ctx, ref, pod.UID)
}

// Recreate deletes the member's Pod, waits until it is gone and makes a
// fresh one (a new UID) from the pool's ConfigMap as it reads now. It does
// not wait for the new Pod to run.
func (c *CTs) Recreate(ctx context.Context, ref vdi.Ref) error {
	p, pod, err := c.member(ctx, ref)
	if err != nil {
		return err
	}
	if pod != nil {
		if err := c.deletePod(ctx, ref, pod.UID); err != nil {
			return err
		}
	}
	return c.createPod(ctx, p, ref.Name)
}

// Dial is the direct path to a member's terminal: TCP to its Pod's IP on
// the pool's terminalPort, when the ConfigMap declares one. Without one,
// or for other protocols, it fails with a plain error, so that the caller
// goes on to the apiserver's exec (ExecPath).
func (c *CTs) Dial(ctx context.Context, ref vdi.Ref, proto vdi.Protocol) (net.Conn, error) {
	if proto != vdi.ProtocolTerminal {
		return nil, fmt.Errorf("kube: %s is a container: it has a terminal, no %s console", ref, proto)
	}
	p, pod, err := c.member(ctx, ref)
	if err != nil {
		return nil, err
	}
	if p.terminalPort == 0 {
		return nil, fmt.Errorf("kube: CT pool %s/%s declares no %s: its terminal is reached through pods/exec", p.Namespace, p.Name, CTKeyTerminalPort)
	}
	if pod == nil || pod.Status.PodIP == "" {
		return nil, fmt.Errorf("kube: %s has no Pod IP yet", ref)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.terminalPort))))
	if err != nil {
		return nil, fmt.Errorf("kube: terminal of %s: %w", ref, err)
	}
	return conn, nil
}
