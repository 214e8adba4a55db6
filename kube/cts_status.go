package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctMemberOf maps a member and its Pod (nil: none) to a member: no Pod is
// stopped; Pending is starting unless a container waits for a reason a
// person must fix (an image that does not pull, a container that keeps
// crashing, no node to run on), which is failed with that reason.
func ctMemberOf(p *ctPool, name string, pod *corev1.Pod) vdi.Member {
	m := vdi.Member{Namespace: p.Namespace, Name: name, Pool: p.Name, Power: vdi.PowerStopped}
	if pod == nil {
		return m
	}
	if pod.DeletionTimestamp != nil {
		m.Power = vdi.PowerStopping
		return m
	}
	if reason := podTrouble(pod); reason != "" {
		m.Power, m.Reason = vdi.PowerFailed, reason
		return m
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		m.Power = vdi.PowerStarting
		if podReady(pod) {
			m.Power, m.Protocols = vdi.PowerRunning, []vdi.Protocol{vdi.ProtocolTerminal}
		}
	case corev1.PodSucceeded:
		m.Power = vdi.PowerStopped
	case corev1.PodFailed:
		m.Power, m.Reason = vdi.PowerFailed, "The container ended"
		if pod.Status.Reason != "" {
			m.Reason += " (" + pod.Status.Reason + ")"
		}
		if pod.Status.Message != "" {
			m.Reason += ": " + pod.Status.Message
		}
	default:
		m.Power = vdi.PowerStarting
	}
	return m
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Container waiting reasons that do not mend by waiting.
var stuckReasons = map[string]string{
	"CrashLoopBackOff":           "The container keeps exiting; check its command and image",
	"ImagePullBackOff":           "The image cannot be pulled; check its name and the registry's credentials",
	"ErrImagePull":               "The image cannot be pulled; check its name and the registry's credentials",
	"InvalidImageName":           "The image name is not valid",
	"ErrImageNeverPull":          "The image is not on the node and its pull policy is Never",
	"CreateContainerConfigError": "The container's configuration is wrong",
	"CreateContainerError":       "The container could not be created",
	"RunContainerError":          "The container could not be started",
}

// podTrouble says why pod cannot run, or "" when nothing is known wrong.
func podTrouble(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if text, ok := stuckReasons[w.Reason]; ok {
				s := text + " (" + w.Reason
				if w.Message != "" {
					s += ": " + w.Message
				}
				return s + ")"
			}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "No node can run it (" + c.Message + ")"
		}
	}
	return ""
}
