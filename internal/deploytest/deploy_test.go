package deploytest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/portal"
)

// overlays are the folders TestDeploy renders, relative to deploy/.
var overlays = []struct{ name, dir string }{
	{"Base", "."}, {"OIDC", "overlays/oidc"}, {"Gateway", "overlays/gateway"}, {"Tailscale", "overlays/tailscale"},
	{"PostgreSQL", "overlays/postgres"}, {"ClusterWide", "overlays/cluster-wide"}, {"Cilium", "overlays/cilium"},
	{"OpenShift", "overlays/openshift"}, {"H264", "overlays/h264"},
}

// TestDeploy renders deploy/ and each overlay with kustomize and applies
// them to a real kube-apiserver with server-side dry-run and strict field
// validation (the Gateway API and CloudNativePG CRDs installed), so that
// the API server validates and admits every object; the Deployment's pod
// is admitted under the namespace's Pod Security "restricted"; then it
// reads back what the Deployment promises an operator.
func TestDeploy(t *testing.T) {
	c := testcluster.MustStart(t)
	installCRDs(t, c)
	root := filepath.Join("..", "..", "deploy")
	known := portal.ConfigEnvNames()
	base, err := deploytest.Render(root)
	if err != nil {
		t.Fatal(err)
	}
	// The namespaces for real (dry-run objects need theirs to exist), and
	// the ServiceAccount the pods name.
	var first []*unstructured.Unstructured
	for _, u := range base {
		if u.GetKind() == "Namespace" || u.GetKind() == "ServiceAccount" {
			first = append(first, u)
		}
	}
	if _, err := deploytest.Apply(c.Config, first, false); err != nil {
		t.Fatal(err)
	}
	for _, tt := range overlays {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := deploytest.Render(filepath.Join(root, tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, u := range objs {
				kinds = append(kinds, u.GetKind())
			}
			kindsWanted := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "FlowSchema", "PriorityLevelConfiguration"}
			switch tt.name {
			case "Tailscale":
				kindsWanted = slices.DeleteFunc(kindsWanted, func(k string) bool { return k == "PodDisruptionBudget" })
			case "OIDC":
				kindsWanted = append(kindsWanted, "Ingress")
			case "Cilium":
				kindsWanted = append(kindsWanted, "CiliumNetworkPolicy")
			case "Gateway":
				kindsWanted = append(kindsWanted, "HTTPRoute")
				if slices.Contains(kinds, "Ingress") {
					t.Errorf("deploy/%s renders an Ingress beside its HTTPRoute", tt.dir)
				}
			}
			for _, want := range kindsWanted {
				if !slices.Contains(kinds, want) {
					t.Errorf("deploy/%s renders %v; want a %s", tt.dir, kinds, want)
				}
			}
			applied, err := deploytest.Apply(c.Config, objs, true)
			if err != nil {
				t.Fatal(err)
			}
			d, err := deploytest.Deployment(applied)
			if err != nil {
				t.Fatal(err)
			}
			checkDeployment(t, d, tt.dir, known)
			if tt.name == "OpenShift" {
				checkOpenShiftPod(t, d)
			}
			checkRestricted(t, c, d)
			checkPolicies(t, tt.dir, applied)
		})
	}
	// The Helm chart's objects, for the same installs and more.
	t.Run("Chart", func(t *testing.T) { checkChartOnCluster(t, c) })
	t.Run("ChartFromOCI", func(t *testing.T) { checkHelmInstallFromOCI(t, c) })
	t.Run("ChartBesideOperatorsSecret", func(t *testing.T) { checkHelmLeavesOperatorsSecret(t, c) })

	// The example PostgreSQL the postgres overlay points at is a valid
	// CloudNativePG Cluster.
	t.Run("CloudNativePGExample", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(root, "overlays", "postgres", "cnpg-cluster.example.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := deploytest.Apply(c.Config, []*unstructured.Unstructured{u}, true); err != nil {
			t.Fatal(err)
		}
	})

	// A misspelt field, as a hand edit would make it, fails the apply.
	t.Run("MisspeltFieldFails", func(t *testing.T) {
		objs, err := deploytest.Render(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() == "Deployment" {
				unstructured.SetNestedField(u.Object, int64(2), "spec", "replica")
			}
		}
		_, err = deploytest.Apply(c.Config, objs, true)
		if err == nil || !strings.Contains(err.Error(), "replica") {
			t.Fatalf("applying a Deployment with spec.replica: %v; want a strict-validation error naming it", err)
		}
	})
}

// checkRestricted creates d's pod with server-side dry-run in its
// namespace, whose Pod Security admission enforces "restricted".
func checkRestricted(t *testing.T, c *testcluster.Cluster, d *appsv1.Deployment) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
		Spec: d.Spec.Template.Spec}
	_, err := c.Client.CoreV1().Pods(d.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Errorf("the Deployment's pod under Pod Security restricted: %v", err)
	}
}

// checkDeployment checks the applied Deployment against the list.
func checkDeployment(t *testing.T, d *appsv1.Deployment, dir string, known map[string]bool) {
	t.Helper()
	spec := d.Spec.Template.Spec
	want := int32(2)
	if dir == "overlays/tailscale" {
		want = 1 // one tailnet node, one name
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		t.Errorf("replicas %v; want %d", d.Spec.Replicas, want)
	}
	if spec.ServiceAccountName != "corral-vdi-portal" {
		t.Errorf("serviceAccountName %q; want the one deploy/rbac.yaml binds", spec.ServiceAccountName)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v; want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("affinity %+v; want anti-affinity across nodes", spec.Affinity)
	}
	var data bool
	for _, v := range spec.Volumes {
		data = data || v.Name == "data" && v.EmptyDir != nil
	}
	if !data {
		t.Error("no emptyDir volume data for the data dir")
	}
	for _, ctr := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := ctr.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s securityContext %+v; want no privilege escalation, a read-only root and ALL capabilities dropped", ctr.Name, sc)
		}
		if ctr.Resources.Limits.Memory().IsZero() || ctr.Resources.Requests.Cpu().IsZero() {
			t.Errorf("container %s resources %+v; want requests and limits", ctr.Name, ctr.Resources)
		}
		if ctr.Name != "portal" {
			continue
		}
		if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("readiness probe %+v; want GET /readyz", p)
		}
		if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe %+v; want GET /healthz", p)
		}
		checkPortalContainer(t, spec, ctr, dir)
		secrets := map[string]string{}
		for _, e := range ctr.Env {
			if strings.HasPrefix(e.Name, "CORRAL_VDI_") && !known[e.Name] {
				t.Errorf("env %s is no setting of the portal", e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
			if e.Value != "" && (strings.Contains(e.Name, "SECRET") || strings.Contains(e.Name, "KEYS")) && e.Name != "CORRAL_VDI_SHARED_SECRETS_FROM" {
				t.Errorf("env %s has a literal value; secrets come by secretKeyRef", e.Name)
			}
		}
		want := map[string]string{
			"CORRAL_VDI_SESSION_KEYS": "corral-vdi-secrets/session-keys",
			"CORRAL_VDI_TOKEN_KEYS":   "corral-vdi-secrets/token-keys",
			"CORRAL_VDI_PEER_SECRET":  "corral-vdi-secrets/peer-secret",
			// /metrics is never open on a deployed portal.
			"CORRAL_VDI_METRICS_TOKEN": "corral-vdi-secrets/metrics-token",
		}
		if dir == "overlays/oidc" || dir == "overlays/gateway" {
			want["CORRAL_VDI_OIDC_CLIENT_SECRET"] = "corral-vdi-secrets/oidc-client-secret"
		}
		for env, ref := range want {
			if secrets[env] != ref {
				t.Errorf("env %s from %q; want secretKeyRef %s", env, secrets[env], ref)
			}
		}
	}
}

// checkPortalContainer checks the portal container's memory limit, drain
// and mode against the pod spec.
func checkPortalContainer(t *testing.T, spec corev1.PodSpec, ctr corev1.Container, dir string) {
	t.Helper()
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	limit := ctr.Resources.Limits.Memory().Value()
	gomem, err := resource.ParseQuantity(strings.TrimSuffix(env["GOMEMLIMIT"], "B"))
	if ratio := float64(gomem.Value()) / float64(limit); err != nil || ratio < 0.85 || ratio > 0.95 {
		t.Errorf("GOMEMLIMIT %q with a memory limit of %d bytes (%v); want about 90%% of it", env["GOMEMLIMIT"], limit, err)
	}
	if l := ctr.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil {
		t.Errorf("lifecycle %+v; want a preStop pause before SIGTERM starts the drain", l)
	}
	drain, err := time.ParseDuration(env["CORRAL_VDI_DRAIN_TIMEOUT"])
	if grace := spec.TerminationGracePeriodSeconds; err != nil || drain <= 0 || grace == nil || time.Duration(*grace)*time.Second < drain+10*time.Second {
		t.Errorf("CORRAL_VDI_DRAIN_TIMEOUT %q, terminationGracePeriodSeconds %v; want a drain the grace period covers", env["CORRAL_VDI_DRAIN_TIMEOUT"], spec.TerminationGracePeriodSeconds)
	}
	zones := false
	for _, c := range spec.TopologySpreadConstraints {
		zones = zones || c.TopologyKey == "topology.kubernetes.io/zone"
	}
	if !zones {
		t.Errorf("topologySpreadConstraints %+v; want a spread across zones", spec.TopologySpreadConstraints)
	}
	if ns, ok := env["CORRAL_VDI_POOL_NAMESPACES"]; (dir == "overlays/cluster-wide") == ok {
		t.Errorf("CORRAL_VDI_POOL_NAMESPACES=%q (set: %v) in deploy/%s; want it only in the namespaced mode", ns, ok, dir)
	}
	if _, on := env["CORRAL_VDI_H264"]; on || dir == "overlays/h264" {
		checkEncoderSidecar(t, spec, env["CORRAL_VDI_H264"])
	}
	if dir == "overlays/postgres" {
		u := env["CORRAL_VDI_DATABASE_URL"]
		if !strings.Contains(u, "@corral-pg-rw.corral-vdi.svc:") || !strings.Contains(u, "sslmode=verify-full") || !strings.Contains(u, "sslrootcert=") {
			t.Errorf("CORRAL_VDI_DATABASE_URL %q; want the CloudNativePG example's host with sslmode=verify-full and its CA", u)
		}
	}
}

// checkPolicies checks the RBAC, Pod Security, NetworkPolicies and routes
// deploy/dir renders, as the API server answered them.
func checkPolicies(t *testing.T, dir string, objs []*unstructured.Unstructured) {
	t.Helper()
	clusterScoped := []string{"nodes", "kubevirts", "virtualmachineclusterinstancetypes", "storageclasses", "volumesnapshotclasses", "storageprofiles"}
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace":
			if u.GetName() == "corral-vdi" && u.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("Namespace corral-vdi labels %v; want Pod Security restricted enforced", u.GetLabels())
			}
		case "ClusterRole":
			if dir == "overlays/cluster-wide" && u.GetName() == "corral-vdi-portal" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
			for _, r := range rules {
				res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
				for _, name := range res {
					if !slices.Contains(clusterScoped, name) {
						t.Errorf("ClusterRole %s grants %s cluster-wide; the namespaced mode grants only cluster-scoped reads there", u.GetName(), name)
					}
				}
			}
		case "RoleBinding":
			subs, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, sub := range subs {
				m := sub.(map[string]any)
				if m["namespace"] != "corral-vdi" || m["name"] != "corral-vdi-portal" {
					t.Errorf("RoleBinding %s/%s binds %v; want the portal's ServiceAccount", u.GetNamespace(), u.GetName(), m)
				}
			}
		case "NetworkPolicy":
			if u.GetName() != "corral-vdi-portal" || dir == "overlays/cluster-wide" {
				continue
			}
			egress, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
			for _, e := range egress {
				raw, _ := json.Marshal(e)
				if strings.Contains(string(raw), `"port":5900`) && !strings.Contains(string(raw), "corral.dev/vdi-pools") {
					t.Errorf("the portal's egress to consoles %s; want only the labelled pool namespaces", raw)
				}
			}
		case "Ingress":
			if c, _, _ := unstructured.NestedString(u.Object, "spec", "ingressClassName"); c == "" {
				t.Errorf("Ingress %s names no ingressClassName", u.GetName())
			}
			for k := range u.GetAnnotations() {
				if strings.HasPrefix(k, "nginx.ingress.kubernetes.io/") {
					t.Errorf("Ingress %s carries %s: ingress-nginx is retired", u.GetName(), k)
				}
			}
		case "CiliumNetworkPolicy":
			checkCiliumPolicy(t, u, objs)
		case "HTTPRoute":
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
			for _, r := range rules {
				if req, _, _ := unstructured.NestedString(r.(map[string]any), "timeouts", "request"); req != "0s" {
					t.Errorf("HTTPRoute %s request timeout %q; want 0s (no timeout) for console websockets", u.GetName(), req)
				}
			}
		}
	}
	var pool []string
	for _, u := range objs {
		if u.GetNamespace() == "corral-vdi-desktops" {
			pool = append(pool, u.GetKind()+"/"+u.GetName())
		}
	}
	for _, want := range []string{"Role/corral-vdi-portal", "RoleBinding/corral-vdi-portal", "NetworkPolicy/corral-vdi-vm-consoles", "NetworkPolicy/corral-vdi-ct-consoles",
		"NetworkPolicy/corral-vdi-ct-egress-deny", "NetworkPolicy/corral-vdi-vm-egress-deny", "NetworkPolicy/corral-vdi-egress-outbound"} {
		if !slices.Contains(pool, want) {
			t.Errorf("the pool namespace corral-vdi-desktops has %v; want %s", pool, want)
		}
	}
}

// checkEncoderSidecar checks that the portal's CORRAL_VDI_H264, h264,
// names the socket its encoder sidecar serves, in an emptyDir only the
// two containers mount; and that the encoder is a native sidecar (an
// init container that keeps running) whose startup probe waits for the
// socket, so that the portal starts once it is there.
func checkEncoderSidecar(t *testing.T, spec corev1.PodSpec, h264 string) {
	t.Helper()
	socket, ok := strings.CutPrefix(h264, "unix:")
	if !ok {
		t.Errorf("CORRAL_VDI_H264 %q; want unix:PATH, the encoder sidecar's socket", h264)
		return
	}
	mounts := map[string]string{} // container -> volume at the socket's folder
	var enc *corev1.Container
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == filepath.Dir(socket) {
				mounts[c.Name] = m.Name
			}
		}
	}
	for i, c := range spec.InitContainers {
		if c.Name == "encoder" {
			enc = &spec.InitContainers[i]
		}
	}
	if enc == nil {
		t.Errorf("no init container named encoder; want the encoder a native sidecar (an init container with restartPolicy Always)")
		return
	}
	if enc.RestartPolicy == nil || *enc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the encoder's restartPolicy %v; want Always (a native sidecar, which keeps running beside the portal)", enc.RestartPolicy)
	}
	if p := enc.StartupProbe; p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, []string{"test", "-S", socket}) {
		t.Errorf("the encoder's startup probe %+v; want test -S %s, so that the portal starts once the socket is there", p, socket)
	}
	if args := enc.Args; len(args) < 3 || !slices.Equal(args[:3], []string{"encoder", "-socket", socket}) {
		t.Errorf("the encoder container's args %q; want encoder -socket %s", args, socket)
	}
	if len(mounts) != 2 || mounts["portal"] == "" || mounts["portal"] != mounts["encoder"] {
		t.Errorf("%s is mounted in %v; want one volume in the portal and encoder containers only", filepath.Dir(socket), mounts)
	}
	for _, v := range spec.Volumes {
		if v.Name == mounts["portal"] && v.EmptyDir == nil {
			t.Errorf("the socket's volume %s is %+v; want an emptyDir of the Pod's own", v.Name, v.VolumeSource)
		}
	}
}
