package portal

// rbacRule is a grant the portal needs on a cluster: what deploy/rbac.yaml's
// ClusterRole gives its ServiceAccount. A test keeps the two equal.
type rbacRule struct {
	Group, Resource string
	Verbs           []string
}

// portalRules are every verb the portal (and doctor, run as it) uses.
var portalRules = []rbacRule{
	{"coordination.k8s.io", "leases", []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{"kubevirt.io", "virtualmachines", []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{"kubevirt.io", "virtualmachineinstances", []string{"get", "list", "watch"}},
	{"kubevirt.io", "kubevirts", []string{"get", "list"}},
	{"instancetype.kubevirt.io", "virtualmachineinstancetypes", []string{"get"}},
	{"instancetype.kubevirt.io", "virtualmachineclusterinstancetypes", []string{"get"}},
	{"clone.kubevirt.io", "virtualmachineclones", []string{"get", "list", "watch", "create", "delete"}},
	{"snapshot.kubevirt.io", "virtualmachinesnapshots", []string{"get", "list", "create", "delete"}},
	{"subresources.kubevirt.io", "virtualmachines/start", []string{"update"}},
	{"subresources.kubevirt.io", "virtualmachines/stop", []string{"update"}},
	{"subresources.kubevirt.io", "virtualmachines/restart", []string{"update"}},
	{"subresources.kubevirt.io", "virtualmachineinstances/vnc", []string{"get"}},
	{"subresources.kubevirt.io", "virtualmachineinstances/console", []string{"get"}},
	{"subresources.kubevirt.io", "virtualmachineinstances/portforward", []string{"get"}},
	{"subresources.kubevirt.io", "virtualmachineinstances/usbredir", []string{"get"}},
	{"", "configmaps", []string{"get", "list", "watch", "create", "update", "delete"}},
	{"", "pods", []string{"get", "list", "watch", "create", "delete"}},
	{"", "persistentvolumeclaims", []string{"get", "patch"}},
	{"", "pods/exec", []string{"get", "create"}},
	{"", "nodes", []string{"get", "list"}},
	{"", "events", []string{"create", "patch"}},
	{"storage.k8s.io", "storageclasses", []string{"get", "list"}},
	{"snapshot.storage.k8s.io", "volumesnapshotclasses", []string{"get", "list"}},
}
