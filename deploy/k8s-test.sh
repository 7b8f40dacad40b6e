#!/usr/bin/env bash
# deploy/k8s-test.sh [--images FILE] [--pods-only] [--timeout SECONDS]
#
# Runs a pab batch through a real Kubernetes control plane on loopback, and grades it.
#   1. Installs etcd-server, kubernetes-client (kubectl), openssl, curl and jq with apt-get
#      when missing; builds pab, deploy/runpod and (deploy/kube-build.sh, cached)
#      kube-apiserver and kube-controller-manager.
#   2. Images: --images FILE (the file `deploy/build-images.sh --images-file` writes; it
#      must have an `agent` line: the reference agent's image), else builds them:
#      deploy/browser-rootfs.sh, then deploy/build-images.sh --browser-rootfs.
#   3. Starts etcd, kube-apiserver (127.0.0.1 only, token auth, AlwaysAllow, a fresh
#      service-account key pair) and kube-controller-manager (the Job controller) in a
#      temporary directory; waits for /readyz.
#   4. Creates the namespace, its `default` ServiceAccount and the results
#      PersistentVolumeClaim; renders the batch (`pab k8s render`: books-sapiens-price and
#      lil-former-projects, --repeat 3 --parallelism 2, the refagent as the agent) and
#      applies it with `kubectl apply --server-side`, printing the server's answer per object.
#   5. The Job controller creates the pods (completion indexes 0 and 1 first). Each Pending
#      pod is fetched from the API server (`kubectl get pod -o json`) and run with podman
#      by runpod (deploy/runpod); its status is patched back (`--subresource=status`), so
#      the controller counts it and creates the next index. Until both Jobs are Complete
#      (or Failed, or --timeout).
#   6. Grades the results directory with `pab run --collect` and the CLI judge
#      (docs/examples/judge.sh) and asserts 6 runs, all graded, score 1.
# --pods-only stops after step 5's first part: it checks that the controller created the
# pods of indexes 0 and 1 of each Job and prints their specs. Every process started here is
# killed and the temporary directory removed on every exit path ($K8S_TEST_RESULTS, when
# set, receives a copy of the results claim's directory first). Needs root (apt-get,
# podman). Exit 0 when every check passed, 1 otherwise, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
images_arg=""
pods_only=0
limit=${K8S_TEST_TIMEOUT:-1800}
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--images) images_arg=${2:?--images needs a file}; shift 2 ;;
	--pods-only) pods_only=1; shift ;;
	--timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
	-h|--help) usage ;;
	*) echo "k8s-test: unknown argument $1" >&2; usage ;;
	esac
done
[[ "$limit" =~ ^[0-9]+$ ]] && [ "$limit" -ge 60 ] && [ "$limit" -le 86400 ] ||
	{ echo "k8s-test: --timeout $limit: want 60 to 86400 seconds" >&2; exit 2; }
if [ -n "$images_arg" ]; then
	[ -f "$images_arg" ] || { echo "k8s-test: --images $images_arg is not a file" >&2; exit 2; }
	images_arg=$(readlink -f "$images_arg")
fi

# The batch under test.
tasks=(books-sapiens-price lil-former-projects)
repeat=3
parallelism=2
ns=pab-k8s-test
batch=k8stest
claim=pab-results # pab k8s render's default --results-claim
agent_cmd=/bin/refagent,--plans,/plans,--cdp

t0=$(date +%s)
step_start=$t0
steps=()
say() { printf 'k8s-test: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
# step NAME: ends the step that is running (records its time) and names the next one.
step_name=""
step() {
	local now
	now=$(date +%s)
	[ -z "$step_name" ] || steps+=("$(printf '%-66s %4ds' "$step_name" $((now - step_start)))")
	step_name=$1
	step_start=$now
	[ -z "$1" ] || say "== $1"
}
print_steps() {
	step ""
	say "step times:"
	local s
	for s in "${steps[@]}"; do say "  $s"; done
	say "  total $(($(date +%s) - t0))s"
}

work=$(mktemp -d /tmp/pab-k8s-test.XXXXXX)
pids=()
runpod_pid=""
cleanup() {
	local rc=$?
	set +e
	local p
	if [ -n "$runpod_pid" ] && kill -0 "$runpod_pid" 2>/dev/null; then
		say "stopping runpod (pid $runpod_pid)"
		kill -TERM "$runpod_pid"
		for _ in $(seq 1200); do kill -0 "$runpod_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$runpod_pid" 2>/dev/null
		wait "$runpod_pid" 2>/dev/null
	fi
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		p=${pids[$i]}
		kill "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ $rc -ne 0 ]; then
		for f in etcd kube-apiserver kube-controller-manager; do
			[ -s "$work/$f.log" ] && { say "last lines of $f.log:"; tail -n 15 "$work/$f.log" >&2; }
		done
	fi
	if [ -n "${K8S_TEST_RESULTS:-}" ] && [ -d "$work/results" ]; then
		mkdir -p "$K8S_TEST_RESULTS" && cp -a "$work/results/." "$K8S_TEST_RESULTS/" &&
			say "results copied to $K8S_TEST_RESULTS"
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. tools ---
step "tools (apt-get when missing)"
need_pkgs=()
command -v etcd >/dev/null || need_pkgs+=(etcd-server)
command -v kubectl >/dev/null || need_pkgs+=(kubernetes-client)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v curl >/dev/null || need_pkgs+=(curl)
command -v jq >/dev/null || need_pkgs+=(jq)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v podman >/dev/null || [ $pods_only = 1 ] || need_pkgs+=(podman runc)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || fail "missing ${need_pkgs[*]} and not root: install them (apt-get install ${need_pkgs[*]})"
	say "apt-get install ${need_pkgs[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_pkgs[@]}" >"$work/apt.log" 2>&1 ||
		{ apt-get update -q >>"$work/apt.log" 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_pkgs[@]}" >>"$work/apt.log" 2>&1; } ||
		{ tail -n 20 "$work/apt.log" >&2; fail "apt-get install ${need_pkgs[*]} failed"; }
fi
say "etcd $(etcd --version | sed -n 's/^etcd Version: //p'), kubectl $(kubectl version --client -o json | jq -r .clientVersion.gitVersion)"

step "build pab and runpod"
(cd "$root" && go build -o "$work/bin/pab" ./cmd/pab) || fail "go build ./cmd/pab"
pab=$work/bin/pab
runpod=""
if [ $pods_only = 0 ]; then
	[ -f "$root/deploy/runpod/main.go" ] || fail "deploy/runpod/main.go is missing: runpod runs the pods (use --pods-only to stop after the Job controller made them)"
	(cd "$root" && go build -o "$work/bin/runpod" ./deploy/runpod) || fail "go build ./deploy/runpod"
	runpod=$work/bin/runpod
fi

step "kube-apiserver and kube-controller-manager (deploy/kube-build.sh)"
kube_version=$(sed -n 's/^KUBE_VERSION=//p' "$root/deploy/kube-build.sh")
kube_dir=${PAB_CACHE:-$HOME/.cache/pab}/kube/$kube_version
"$root/deploy/kube-build.sh" "$kube_dir" >&2 || fail "deploy/kube-build.sh"

# --- 2. images ---
step "images"
if [ -n "$images_arg" ]; then
	images=$images_arg
	say "images from $images"
else
	rootfs=${PAB_CACHE:-$HOME/.cache/pab}/deploy/browser-rootfs.tar
	"$root/deploy/browser-rootfs.sh" "$rootfs" >&2 || fail "deploy/browser-rootfs.sh"
	images=$work/images.txt
	"$root/deploy/build-images.sh" --browser-rootfs "$rootfs" --images-file "$images" "${tasks[@]}" >&2 ||
		fail "deploy/build-images.sh"
fi
sed 's/^/k8s-test:   /' "$images" >&2
agent_image=$(awk '$1 == "agent" { print $2 }' "$images")
[ -n "$agent_image" ] || fail "$images has no 'agent' line (the reference agent's image, kind agent, from deploy/build-images.sh)"
grep -q '^browser ' "$images" || fail "$images has no 'browser' line (build-images.sh --browser-rootfs)"
for t in "${tasks[@]}"; do grep -q "^task/$t " "$images" || fail "$images has no task/$t line"; done

# --- 3. the control plane ---
step "start etcd, kube-apiserver, kube-controller-manager"
# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
etcd_port=$(free_port)
etcd_peer=$(free_port)
api_port=$(free_port)
while [ "$etcd_peer" = "$etcd_port" ]; do etcd_peer=$(free_port); done
while [ "$api_port" = "$etcd_port" ] || [ "$api_port" = "$etcd_peer" ]; do api_port=$(free_port); done
say "ports on 127.0.0.1: etcd client $etcd_port, peer $etcd_peer; kube-apiserver $api_port"

mkdir -p "$work/etcd" "$work/pki" "$work/manifests" "$work/pods" "$work/results"
chmod 700 "$work/etcd"
etcd --name k8s-test --data-dir "$work/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "k8s-test=http://127.0.0.1:$etcd_peer" \
	>"$work/etcd.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do
	curl -fsS "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"' && break
	kill -0 "${pids[0]}" 2>/dev/null || fail "etcd exited (etcd.log above)"
	[ "$i" -lt 100 ] || fail "etcd not healthy after 10s"
	sleep 0.1
done
say "etcd healthy"

openssl genrsa -out "$work/pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$work/pki/sa.key" -pubout -out "$work/pki/sa.pub" 2>/dev/null
token=$(openssl rand -hex 24)
printf '%s,admin,1,"system:masters"\n' "$token" >"$work/pki/tokens.csv"
chmod 600 "$work/pki/sa.key" "$work/pki/tokens.csv"

"$kube_dir/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none --secure-port="$api_port" --cert-dir="$work/pki" \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$work/pki/sa.pub" \
	--service-account-signing-key-file="$work/pki/sa.key" --authorization-mode=AlwaysAllow \
	--token-auth-file="$work/pki/tokens.csv" --anonymous-auth=false --service-cluster-ip-range=10.96.0.0/16 \
	--profiling=false >"$work/kube-apiserver.log" 2>&1 &
pids+=($!)
api_pid=$!

# The serving certificate the API server made for itself (cert-dir) holds its own CA, so
# kubectl verifies the server; the token authenticates as system:masters.
for i in $(seq 300); do
	[ -s "$work/pki/apiserver.crt" ] && break
	kill -0 "$api_pid" 2>/dev/null || fail "kube-apiserver exited (kube-apiserver.log above)"
	sleep 0.1
done
[ -s "$work/pki/apiserver.crt" ] || fail "kube-apiserver wrote no serving certificate in 30s"
export KUBECONFIG=$work/kubeconfig
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: k8s-test
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$work/pki/apiserver.crt"}
users:
- name: admin
  user: {token: "$token"}
contexts:
- name: k8s-test
  context: {cluster: k8s-test, user: admin, namespace: $ns}
current-context: k8s-test
EOF
chmod 600 "$KUBECONFIG"
# kubectl's discovery and HTTP caches stay in the temporary directory, not ~/.kube/cache
kubectl() { command kubectl --cache-dir "$work/kube-cache" "$@"; }
for i in $(seq 600); do
	if curl -fsS --cacert "$work/pki/apiserver.crt" -H "Authorization: Bearer $token" \
		"https://127.0.0.1:$api_port/readyz" >"$work/readyz" 2>/dev/null; then
		break
	fi
	kill -0 "$api_pid" 2>/dev/null || fail "kube-apiserver exited (kube-apiserver.log above)"
	[ "$i" -lt 600 ] || fail "kube-apiserver not ready after 60s"
	sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/pki/apiserver.crt" "https://127.0.0.1:$api_port/readyz")
[ "$code" = 401 ] || fail "an anonymous request got HTTP $code, want 401"
say "kube-apiserver ready: /readyz $(cat "$work/readyz"), server $(kubectl version -o json 2>/dev/null | jq -r .serverVersion.gitVersion); anonymous: HTTP 401"

"$kube_dir/kube-controller-manager" --kubeconfig="$KUBECONFIG" --bind-address=127.0.0.1 --secure-port=0 \
	--controllers=job,namespace,serviceaccount-token --leader-elect=false \
	--service-account-private-key-file="$work/pki/sa.key" --use-service-account-credentials=false \
	>"$work/kube-controller-manager.log" 2>&1 &
pids+=($!)
kcm_pid=$!

# every listening socket of the three is on 127.0.0.1 (the controller manager serves none)
if command -v ss >/dev/null; then
	sleep 1
	pidre=$(IFS='|'; echo "${pids[*]}")
	ss -Hltnp | grep -E "pid=($pidre)," >"$work/listen.txt" || true
	bad=$(awk '$4 !~ /^127\.0\.0\.1:/' "$work/listen.txt")
	[ -z "$bad" ] || fail "listening beyond 127.0.0.1: $bad"
	say "listening: $(awk '{ split($6, a, "\""); printf "%s %s; ", a[2], $4 }' "$work/listen.txt")(all 127.0.0.1)"
fi

# --- 4. the batch's objects ---
step "namespace, service account, claim; render; apply"
kubectl create namespace "$ns" -o name >&2 || fail "create namespace $ns"
# pods are admitted only when their service account exists; no serviceaccount controller runs
kubectl -n "$ns" create serviceaccount default -o name >&2 || fail "create serviceaccount default"
cat >"$work/claim.yaml" <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim, namespace: $ns}
spec:
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
EOF
kubectl apply --server-side -f "$work/claim.yaml" >&2 || fail "apply $work/claim.yaml"

"$pab" --repo "$root" k8s render --images "$images" --agent-image "$agent_image" \
	--agent-command "$agent_cmd" --repeat "$repeat" --parallelism "$parallelism" --timeout 5m \
	--namespace "$ns" --batch "$batch" --results-claim "$claim" --out "$work/manifests" "${tasks[@]}" ||
	fail "pab k8s render"
say "rendered: $(cd "$work/manifests" && ls | tr '\n' ' ')"
kubectl apply --server-side -f "$work/manifests/" >"$work/apply.out" 2>&1 ||
	{ cat "$work/apply.out" >&2; fail "kubectl apply --server-side -f manifests/"; }
say "the API server's answer (kubectl apply --server-side):"
sed 's/^/k8s-test:   /' "$work/apply.out" >&2
# every object as stored: its uid and resourceVersion
kubectl get -f "$work/manifests/" -f "$work/claim.yaml" \
	-o custom-columns='KIND:.kind,NAME:.metadata.name,UID:.metadata.uid,RESOURCEVERSION:.metadata.resourceVersion' |
	sed 's/^/k8s-test:   /' >&2
[ "$(grep -c 'serverside-applied' "$work/apply.out")" = $((1 + ${#tasks[@]})) ] ||
	fail "want $((1 + ${#tasks[@]})) objects serverside-applied (a NetworkPolicy and ${#tasks[@]} Jobs)"

# --- 5. the Job controller's pods ---
step "the Job controller creates the first pods"
sel="pab.dev/batch=$batch"
want_first=$((${#tasks[@]} * parallelism))
for i in $(seq 120); do
	n=$(kubectl get pods -l "$sel" -o json | jq '.items | length')
	[ "$n" -ge "$want_first" ] && break
	kill -0 "$kcm_pid" 2>/dev/null || fail "kube-controller-manager exited (kube-controller-manager.log above)"
	[ "$i" -lt 120 ] || fail "the Job controller made $n pods in 60s, want $want_first"
	sleep 0.5
done
sleep 2 # a controller that made too many would show them now
kubectl get pods -l "$sel" -o json >"$work/first-pods.json"
say "pods the Job controller created:"
jq -r '.items[] | "\(.metadata.name)  job=\(.metadata.ownerReferences[0].name)  index=\(.metadata.annotations["batch.kubernetes.io/job-completion-index"])  phase=\(.status.phase)  finalizers=\(.metadata.finalizers // [] | join(","))"' \
	"$work/first-pods.json" | sed 's/^/k8s-test:   /' >&2
for t in "${tasks[@]}"; do
	job=$batch-$t
	got=$(jq -r --arg j "$job" '[.items[] | select(.metadata.ownerReferences[0].name == $j) |
		.metadata.annotations["batch.kubernetes.io/job-completion-index"]] | sort | join(",")' "$work/first-pods.json")
	[ "$got" = "0,1" ] || fail "Job $job: pods with completion indexes [$got], want [0,1] (parallelism $parallelism)"
done
say "the pods' specs (init containers in order, sidecars marked; the agent; the index in the environment):"
jq -r '.items[] | "  pod \(.metadata.name) (hostname \(.spec.hostname // "-"), subdomain \(.spec.subdomain // "-"), serviceAccount \(.spec.serviceAccountName))",
	(.spec.initContainers[] | "    init \(.name)\(if .restartPolicy == "Always" then " (sidecar)" else "" end): \(.image)  \(.command | join(" ") | .[0:110])"),
	(.spec.containers[] | "    container \(.name): \(.image)  \(.command // [] | join(" ") | .[0:110])"),
	"    env JOB_COMPLETION_INDEX of every container: \([.spec.initContainers[], .spec.containers[] | (.env // [])[] | select(.name == "JOB_COMPLETION_INDEX") | .valueFrom.fieldRef.fieldPath] | unique | join(", "))",
	"    volumes: \([.spec.volumes[] | if .persistentVolumeClaim then "\(.name)=pvc:\(.persistentVolumeClaim.claimName)" else .name end] | join(" "))"' \
	"$work/first-pods.json" | sed 's/^/k8s-test: /' >&2
if [ $pods_only = 1 ]; then
	say "pod spec of the first pod, as the API server holds it:"
	jq '.items[0] | {metadata: {name: .metadata.name, labels: .metadata.labels, annotations: .metadata.annotations, finalizers: .metadata.finalizers, ownerReferences: .metadata.ownerReferences}, spec: .spec}' \
		"$work/first-pods.json" >&2
	kubectl get jobs -o wide >&2
	print_steps
	say "PASS (--pods-only): the Job controller created the pods of indexes 0 and 1 of each Job"
	exit 0
fi

step "run the pods with podman (runpod), report their phases"
hostdir=$work/results
chmod 0755 "$hostdir"
runtime_args=()
if [ -n "${PAB_PODMAN_RUNTIME:-}" ]; then
	runtime_args=(--runtime "$PAB_PODMAN_RUNTIME")
elif [ -f "$root/deploy/podman-env.sh" ]; then
	# picks the runc wrapper only where the kernel refuses setrlimit
	# shellcheck source=/dev/null
	. "$root/deploy/podman-env.sh"
	pab_podman_init "$work/podman" "$(awk '$1 == "replay" { print $2 }' "$images")" >&2 ||
		fail "pab_podman_init (deploy/podman-env.sh)"
	[ -z "${PAB_PODMAN_RUNTIME:-}" ] || runtime_args=(--runtime "$PAB_PODMAN_RUNTIME")
fi
rt="${runtime_args[*]}"
say "runpod ${rt:-(podman default runtime)}; results claim $claim -> $hostdir"
# patch_status POD FILE: merge FILE ({"status": ...}) into the pod's status subresource, as a
# kubelet reports a pod's phase; prints the API server's answer. kubectl patch
# --subresource needs kubectl 1.24 or later (Debian's kubernetes-client is 1.20): else
# the same merge patch goes to /api/v1/namespaces/NS/pods/POD/status with curl.
if [ "${K8S_TEST_PATCH:-}" != curl ] && kubectl patch --help 2>/dev/null | grep -q -- '--subresource'; then
	patch_status() {
		kubectl patch pod "$1" --subresource=status --type=merge --patch-file "$2" \
			-o jsonpath='{.metadata.name}: status.phase={.status.phase}{"\n"}' | sed 's/^/k8s-test:   API server: /' >&2
	}
	say "pod phases go back with kubectl patch --subresource=status"
else
	patch_status() {
		curl -fsS --cacert "$work/pki/apiserver.crt" -H "Authorization: Bearer $token" -X PATCH \
			-H 'Content-Type: application/merge-patch+json' --data-binary "@$2" \
			"https://127.0.0.1:$api_port/api/v1/namespaces/$ns/pods/$1/status" |
			jq -r '"\(.metadata.name): status.phase=\(.status.phase)"' | sed 's/^/k8s-test:   API server: /' >&2
	}
	say "pod phases go back with curl -X PATCH .../pods/NAME/status (K8S_TEST_PATCH=curl, or a kubectl before 1.24 without patch --subresource)"
fi
declare -A ran=()
deadline=$(($(date +%s) + limit))
npods=0
while :; do
	kubectl get jobs -o json >"$work/jobs.json"
	done_jobs=$(jq '[.items[] | select(any(.status.conditions[]?; (.type == "Complete" or .type == "Failed") and .status == "True"))] | length' "$work/jobs.json")
	[ "$done_jobs" = ${#tasks[@]} ] && break
	[ "$(date +%s)" -lt "$deadline" ] || fail "the Jobs did not finish in ${limit}s"
	kubectl get pods -l "$sel" -o json >"$work/pods.json"
	mapfile -t pending < <(jq -r '.items[] | select(.status.phase == "Pending" and .metadata.deletionTimestamp == null) |
		.metadata.name' "$work/pods.json")
	started=0
	for p in "${pending[@]}"; do
		[ -z "${ran[$p]:-}" ] || continue
		ran[$p]=1
		started=1
		npods=$((npods + 1))
		kubectl get pod "$p" -o json >"$work/pods/$p.json"
		idx=$(jq -r '.metadata.annotations["batch.kubernetes.io/job-completion-index"]' "$work/pods/$p.json")
		say "pod $p (index $idx): runpod ..."
		ps=$(date +%s)
		# in the background, so that a signal reaches the trap at once, which stops runpod
		# (it removes its podman pod) before the runtime wrapper in $work is removed
		"$runpod" --status-file "$work/pods/$p.status.json" --volume-dir "$claim=$hostdir" \
			--logs "$work/pods/$p.logs" --timeout 10m "${runtime_args[@]}" "$work/pods/$p.json" \
			>"$work/pods/$p.runpod.log" 2>&1 &
		runpod_pid=$!
		rc=0
		wait "$runpod_pid" || rc=$?
		runpod_pid=""
		pe=$(date +%s)
		if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
			tail -n 30 "$work/pods/$p.runpod.log" >&2
			fail "runpod $p: exit $rc (its own error)"
		fi
		phase=$(jq -r '.status.phase' "$work/pods/$p.status.json")
		say "pod $p: $phase in $((pe - ps))s (runpod exit $rc); $(jq -r '[.status.initContainerStatuses[]?, .status.containerStatuses[]? | "\(.name)=\(.state.terminated.exitCode // "?")"] | join(" ")' "$work/pods/$p.status.json")"
		if [ $rc -ne 0 ]; then
			tail -n 30 "$work/pods/$p.runpod.log" >&2
			for l in "$work/pods/$p.logs"/*.log; do
				[ -f "$l" ] && { say "$(basename "$l"):"; tail -n 10 "$l" >&2; }
			done
		fi
		patch_status "$p" "$work/pods/$p.status.json" || fail "patch the status of pod $p"
	done
	[ $started = 1 ] || sleep 1
done
kubectl get jobs -o json >"$work/jobs.json"
say "ran $npods pods; the Jobs:"
jq -r '.items[] | "  \(.metadata.name): completions \(.status.succeeded // 0)/\(.spec.completions), failed \(.status.failed // 0), completedIndexes \(.status.completedIndexes // "-"), conditions \([.status.conditions[]? | select(.status == "True") | .type] | join(","))"' \
	"$work/jobs.json" | sed 's/^/k8s-test:/' >&2
kubectl get jobs >&2
# the controller counted every pod and removed its job-tracking finalizer itself
kubectl get pods -l "$sel" -o json | jq -r '.items[] | "  \(.metadata.name): index \(.metadata.annotations["batch.kubernetes.io/job-completion-index"]), \(.status.phase), finalizers [\(.metadata.finalizers // [] | join(","))]"' |
	sed 's/^/k8s-test:/' >&2
left=$(kubectl get pods -l "$sel" -o json | jq '[.items[] | select((.metadata.finalizers // []) | length > 0)] | length')
[ "$left" = 0 ] || fail "$left pods still carry a finalizer after their Job finished"
for t in "${tasks[@]}"; do
	jq -e --arg j "$batch-$t" --argjson n "$repeat" '.items[] | select(.metadata.name == $j) |
		select(.status.succeeded == $n and any(.status.conditions[]?; .type == "Complete" and .status == "True"))' \
		"$work/jobs.json" >/dev/null || fail "Job $batch-$t is not Complete with $repeat completions"
done

# --- 6. grade ---
step "grade: pab run --collect"
"$pab" --repo "$root" run --collect "$hostdir/$batch" --judge cli --judge-cmd "$root/docs/examples/judge.sh" \
	--label refagent-k8s >&2 || fail "pab run --collect $hostdir/$batch"
sum=$hostdir/$batch/summary.json
jq -r '.runs[] | "  \(.task)/\(.repeat): \(.status), score \(.score), \(.pages) page(s), \(.requests) requests (exact \(.exact * 100 | round)%, fuzzy \(.fuzzy * 100 | round)%, miss \(.miss * 100 | round)%)"' "$sum" |
	sed 's/^/k8s-test:/' >&2
runs=$(jq '.runs | length' "$sum")
good=$(jq '[.runs[] | select(.status == "graded" and .score == 1 and .passed == true)] | length' "$sum")
want=$((${#tasks[@]} * repeat))
[ "$runs" = "$want" ] || fail "summary.json has $runs runs, want $want"
[ "$good" = "$want" ] || fail "$good of $want runs graded with score 1"
print_steps
say "PASS: $want runs from the API server's pods, all graded, score 1"
