#!/usr/bin/env bash
# make run-cluster: the portal on its Kubernetes backend, all on this
# machine. It starts the tests' real kube-apiserver + etcd with the KubeVirt
# stand-in (TEST-ONLY: its VMs are real local desktops, Xvnc + RDP), makes a
# demo namespace with a golden VM and a pool of three cloned from it, then
# runs the portal signed in to the cluster as its ServiceAccount (only
# deploy/rbac.yaml). Ctrl-C stops both and deletes the cluster's data.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=bin/testcluster
mkdir -p bin
go build -o bin/testcluster-demo ./internal/testcluster/cmd/testcluster
rm -f "$dir/ready"
bin/testcluster-demo -demo -dir "$dir" &
cluster=$!
trap 'kill "$cluster" 2>/dev/null || true; wait "$cluster" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
	[ -e "$dir/ready" ] && break
	if ! kill -0 "$cluster" 2>/dev/null; then
		echo "run-cluster: the test cluster did not start (see above)" >&2
		exit 1
	fi
	sleep 0.2
done
[ -e "$dir/ready" ] || { echo "run-cluster: the test cluster was not ready after 2 minutes" >&2; exit 1; }
admins=${CORRAL_VDI_ADMINS:-admin}
echo "Sign in as ${admins%%,*} to manage pools at /admin; any other name is a user."
echo "Each VM prints its RDP sign-in here when it boots; or pick \"Use VNC\" on the console page."
CORRAL_VDI_BACKEND=kube KUBECONFIG="$dir/portal.kubeconfig" CORRAL_VDI_ADMINS="$admins" \
	CORRAL_VDI_DATA_DIR="${CORRAL_VDI_DATA_DIR:-bin/run-cluster-data}" ./bin/corral-vdi-portal serve
