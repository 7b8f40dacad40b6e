#!/usr/bin/env bash
# deploy/k8s-test.sh [--images FILE] [--pods-only] [--timeout SECONDS] [--repeat N] [--parallelism P]
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
#      It also starts deploy/kubeletlogs, a stand-in for the kubelet's container-log
#      endpoint (TLS both ways, its own CA), registers it as Node "podman", and binds each
#      pod to it, so that `kubectl logs` (pods/log) goes through the API server to it.
#   4. Creates the namespace, its `default` ServiceAccount and a Secret; renders every
#      manifest mode of `pab k8s render` (log results, a results claim, --secret-env,
#      the model gateway, pull secrets, --task-image-prefix, no TTL) and checks each
#      with `kubectl apply --dry-run=server`; renders the batch (books-sapiens-price and
#      lil-former-projects, --repeat 3 --parallelism 2, the refagent as the agent, its
#      key from the Secret, results in the collectors' logs: no PVC) and a batch of one
#      run whose agent crashes on purpose, and applies them (`kubectl apply
#      --server-side`); checks that rendering the same batch name again is refused
#      without --replace.
#   5. The Job controller creates the pods. Each Pending pod is bound to the node,
#      fetched (`kubectl get pod -o json`) and run with podman by runpod (deploy/runpod),
#      all of them at once (as many as the controller made: parallelism 2 per Job);
#      each status is patched back (`--subresource=status`), so the controller counts it
#      and creates the next index. Until every Job is Complete or Failed (or --timeout).
#      It prints how many pods ran at once and the runs per hour.
#   6. `kubectl wait --for=condition=complete`, then `pab k8s status` and `pab k8s
#      collect` for both batches: all 6 runs come from the collectors' logs through the
#      API server, the crashed run's index is reported failed; the key reached each
#      agent (refagent --env-digest) and is in no log and no run file; `pab run
#      --collect` with the CLI judge (docs/examples/judge.sh) grades 6 runs, score 1.
# --repeat N and --parallelism P change the batch (for a throughput measurement).
# --pods-only stops after step 5's first part: it checks that the controller created the
# pods of indexes 0 and 1 of each Job and prints their specs. Every process started here is
# killed and the temporary directory removed on every exit path ($K8S_TEST_RESULTS, when
# set, receives a copy of the collected runs first). Needs root (apt-get, podman). Exit 0
# when every check passed, 1 otherwise, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
images_arg=""
pods_only=0
limit=${K8S_TEST_TIMEOUT:-1800}
usage() { sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
repeat=3
parallelism=2
while [ $# -gt 0 ]; do
	case "$1" in
	--images) images_arg=${2:?--images needs a file}; shift 2 ;;
	--pods-only) pods_only=1; shift ;;
	--timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
	--repeat) repeat=${2:?--repeat needs a number}; shift 2 ;;
	--parallelism) parallelism=${2:?--parallelism needs a number}; shift 2 ;;
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

[[ "$repeat" =~ ^[0-9]+$ ]] && [ "$repeat" -ge 1 ] && [ "$repeat" -le 50 ] || { echo "k8s-test: --repeat $repeat: want 1 to 50" >&2; exit 2; }
[[ "$parallelism" =~ ^[0-9]+$ ]] && [ "$parallelism" -ge 1 ] && [ "$parallelism" -le 20 ] || { echo "k8s-test: --parallelism $parallelism: want 1 to 20" >&2; exit 2; }

# The batch under test.
tasks=(books-sapiens-price lil-former-projects)
ns=pab-k8s-test
batch=k8stest
failbatch=k8sfail # one run whose agent crashes: a failed index
node=podman
agent_cmd=/bin/refagent,--plans,/plans,--cdp,--env-digest,PAB_TEST_KEY

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
runpod_pids=()
cleanup() {
	local rc=$?
	set +e
	local p
	for p in "${runpod_pids[@]}"; do
		kill -0 "$p" 2>/dev/null && { say "stopping runpod (pid $p)"; kill -TERM "$p"; }
	done
	for p in "${runpod_pids[@]}"; do
		for _ in $(seq 1200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
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
	if [ -n "${K8S_TEST_RESULTS:-}" ] && [ -d "$work/runs" ]; then
		mkdir -p "$K8S_TEST_RESULTS" && cp -a "$work/runs/." "$K8S_TEST_RESULTS/" &&
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
	. "$root/scripts/apt.sh" # waits for the dpkg lock of a busy machine
	apt_get install -y -q "${need_pkgs[@]}" >"$work/apt.log" 2>&1 ||
		{ apt_get update -q >>"$work/apt.log" 2>&1 &&
			apt_get install -y -q "${need_pkgs[@]}" >>"$work/apt.log" 2>&1; } ||
		{ tail -n 20 "$work/apt.log" >&2; fail "apt-get install ${need_pkgs[*]} failed"; }
fi
say "etcd $(etcd --version | sed -n 's/^etcd Version: //p'), kubectl $(kubectl version --client -o json | jq -r .clientVersion.gitVersion)"

step "build pab, runpod and kubeletlogs"
(cd "$root" && go build -o "$work/bin/pab" ./cmd/pab) || fail "go build ./cmd/pab"
pab=$work/bin/pab
(cd "$root" && go build -o "$work/bin/kubeletlogs" ./deploy/kubeletlogs) || fail "go build ./deploy/kubeletlogs"
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

mkdir -p "$work/etcd" "$work/pki" "$work/pods" "$work/runs"
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

# the kubelet stand-in's CA: its serving certificate (127.0.0.1) and the API server's
# client certificate; each side verifies the other
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/pki/kubelet-ca.key" -out "$work/pki/kubelet-ca.crt" \
	-days 1 -subj /CN=pab-k8s-test-kubelet-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/pki/kubelet.key" -out "$work/pki/kubelet.csr" -subj /CN=$node 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$work/pki/kubelet.ext"
openssl x509 -req -in "$work/pki/kubelet.csr" -CA "$work/pki/kubelet-ca.crt" -CAkey "$work/pki/kubelet-ca.key" \
	-CAcreateserial -days 1 -extfile "$work/pki/kubelet.ext" -out "$work/pki/kubelet.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/pki/apiserver-kubelet-client.key" -out "$work/pki/client.csr" \
	-subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' >"$work/pki/client.ext"
openssl x509 -req -in "$work/pki/client.csr" -CA "$work/pki/kubelet-ca.crt" -CAkey "$work/pki/kubelet-ca.key" \
	-CAcreateserial -days 1 -extfile "$work/pki/client.ext" -out "$work/pki/apiserver-kubelet-client.crt" 2>/dev/null
[ -s "$work/pki/kubelet.crt" ] && [ -s "$work/pki/apiserver-kubelet-client.crt" ] || fail "openssl: the kubelet certificates"

"$kube_dir/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
	--kubelet-client-certificate="$work/pki/apiserver-kubelet-client.crt" --kubelet-client-key="$work/pki/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$work/pki/kubelet-ca.crt" --kubelet-preferred-address-types=InternalIP \
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
export KUBECACHEDIR=$work/kube-cache # the kubectl that pab runs
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

"$work/bin/kubeletlogs" --dir "$work/pods" --cert "$work/pki/kubelet.crt" --key "$work/pki/kubelet.key" \
	--client-ca "$work/pki/kubelet-ca.crt" --port-file "$work/kubeletlogs.port" >"$work/kubeletlogs.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do
	[ -s "$work/kubeletlogs.port" ] && break
	kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/kubeletlogs.log" >&2; fail "kubeletlogs exited"; }
	[ "$i" -lt 100 ] || fail "kubeletlogs not listening after 10s"
	sleep 0.1
done
kubelet_port=$(cat "$work/kubeletlogs.port")
# api_patch PATH FILE: a merge patch (of a status subresource, as a kubelet sends it)
api_patch() {
	curl -fsS --cacert "$work/pki/apiserver.crt" -H "Authorization: Bearer $token" -X PATCH \
		-H 'Content-Type: application/merge-patch+json' --data-binary "@$2" "https://127.0.0.1:$api_port$1"
}
# api_post PATH FILE
api_post() {
	curl -fsS --cacert "$work/pki/apiserver.crt" -H "Authorization: Bearer $token" -X POST \
		-H 'Content-Type: application/json' --data-binary "@$2" "https://127.0.0.1:$api_port$1"
}
printf '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "%s", "labels": {"kubernetes.io/hostname": "%s"}}}\n' \
	"$node" "$node" >"$work/node.json"
kubectl create -f "$work/node.json" -o name >&2 || fail "create node $node"
printf '{"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}], "daemonEndpoints": {"kubeletEndpoint": {"Port": %s}}}}\n' \
	"$kubelet_port" >"$work/node-status.json"
api_patch "/api/v1/nodes/$node/status" "$work/node-status.json" >/dev/null || fail "patch the status of node $node"
say "node $node: its kubelet log endpoint is kubeletlogs on 127.0.0.1:$kubelet_port (client certificates of its own CA only)"

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
step "namespace, service account, secret; every render mode: server-side dry-run"
kubectl create namespace "$ns" -o name >&2 || fail "create namespace $ns"
# pods are admitted only when their service account exists; no serviceaccount controller runs
kubectl -n "$ns" create serviceaccount default -o name >&2 || fail "create serviceaccount default"
secret_value="pab-test-$(openssl rand -hex 16)"
kubectl -n "$ns" create secret generic pab-test-key --from-literal=key="$secret_value" -o name >&2 || fail "create secret"
secret_digest=$(printf '%s' "$secret_value" | sha256sum | cut -d' ' -f1)
kubectl -n "$ns" get secret pab-test-key -o json >"$work/secrets.json"
chmod 600 "$work/secrets.json"

replay_image=$(awk '$1 == "replay" { print $2 }' "$images")
render() { "$pab" --repo "$root" k8s render --images "$images" --agent-image "$agent_image" --namespace "$ns" "$@"; }
# every mode render has; each set of manifests goes through the API server's validation
# and admission without being stored (kubectl apply --dry-run=server)
modes=(
	"log|--offline --agent-command $agent_cmd --batch m-log"
	"claim-rwx|--offline --batch m-claim --results-claim pab-results --allow-dns"
	"secret-env|--offline --batch m-secret --secret-env PAB_TEST_KEY=pab-test-key/key --agent-env MODEL_URL=http://x:1"
	"gateway|--offline --batch m-gw --gateway-image $replay_image --gateway-port 8080 --gateway-args a,b --gateway-secret-env KEY=pab-test-key/key --image-pull-secret regcred"
	"prefix-ttl0|--offline --batch m-prefix --task-image-prefix registry.example.com/pab/task- --ttl 0 --timeout 1m"
	"egress-probe|--offline --batch netcheck --agent-env REFAGENT_MODE=egress --repeat 1"
)
for m in "${modes[@]}"; do
	name=${m%%|*}
	# shellcheck disable=SC2086 # the flags are words
	render ${m#*|} --out "$work/render-$name" "${tasks[@]}" 2>"$work/render-$name.log" ||
		{ cat "$work/render-$name.log" >&2; fail "pab k8s render ($name)"; }
	kubectl apply --dry-run=server -f "$work/render-$name/" >"$work/dry-$name.out" 2>&1 ||
		{ cat "$work/dry-$name.out" >&2; fail "kubectl apply --dry-run=server ($name) refused a manifest"; }
	n=$(grep -c 'server dry run' "$work/dry-$name.out" || true)
	want=$(cat "$work/render-$name"/*.yaml | grep -c '^kind: ')
	[ "$n" = "$want" ] || { cat "$work/dry-$name.out" >&2; fail "$name: $n objects passed the dry run, want $want"; }
	say "render mode $name: $(cd "$work/render-$name" && ls | tr '\n' ' ')- $n objects pass the server-side dry run"
done
grep -q 'image: registry.example.com/pab/task-books-sapiens-price:[0-9a-f]\{16\}$' "$work/render-prefix-ttl0/job-books-sapiens-price.yaml" ||
	fail "--task-image-prefix did not keep the content tag"

step "render and apply the batch (results in the collectors' logs, no PVC)"
render --agent-command "$agent_cmd" --repeat "$repeat" --parallelism "$parallelism" --timeout 5m \
	--batch "$batch" --secret-env PAB_TEST_KEY=pab-test-key/key --out "$work/manifests" "${tasks[@]}" ||
	fail "pab k8s render"
# the failing batch: no --agent-command, so the agent's own exit fails its pod
render --repeat 1 --batch "$failbatch" --agent-env REFAGENT_MODE=crash --out "$work/manifests-fail" "${tasks[0]}" ||
	fail "pab k8s render (failing batch)"
say "rendered: $(cd "$work/manifests" && ls | tr '\n' ' ')"
kubectl apply --server-side -f "$work/manifests/" -f "$work/manifests-fail/" >"$work/apply.out" 2>&1 ||
	{ cat "$work/apply.out" >&2; fail "kubectl apply --server-side"; }
say "the API server's answer (kubectl apply --server-side):"
sed 's/^/k8s-test:   /' "$work/apply.out" >&2
kubectl get -f "$work/manifests/" \
	-o custom-columns='KIND:.kind,NAME:.metadata.name,UID:.metadata.uid,RESOURCEVERSION:.metadata.resourceVersion' |
	sed 's/^/k8s-test:   /' >&2
[ "$(grep -c 'serverside-applied' "$work/apply.out")" = $((3 + ${#tasks[@]})) ] ||
	fail "want $((3 + ${#tasks[@]})) objects serverside-applied (two NetworkPolicies and $((1 + ${#tasks[@]})) Jobs)"
[ "$(kubectl get pvc -o name | wc -l)" = 0 ] || fail "a PersistentVolumeClaim exists in $ns"
# the batch name is now taken: render refuses it, --replace renders it
if render --repeat 1 --batch "$batch" --out "$work/again" "${tasks[0]}" 2>"$work/again-refused.log"; then
	fail "pab k8s render accepted batch $batch, which exists in the cluster"
fi
grep -q -- '--replace' "$work/again-refused.log" || { cat "$work/again-refused.log" >&2; fail "the refusal does not name --replace"; }
render --repeat 1 --batch "$batch" --replace --out "$work/again" "${tasks[0]}" 2>"$work/again.log" ||
	{ cat "$work/again.log" >&2; fail "pab k8s render --replace"; }
say "render refuses the taken batch name $batch without --replace: $(head -c 200 "$work/again-refused.log")..."
grep -rq -- "$secret_value" "$work/manifests" "$work/apply.out" && fail "the secret's value is in a manifest"

step "the Job controller creates the first pods"
sel="pab.dev/batch=$batch"
first=$((parallelism < repeat ? parallelism : repeat))
want_first=$((${#tasks[@]} * first))
want_idx=$(seq -s, 0 $((first - 1)))
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
	[ "$got" = "$want_idx" ] || fail "Job $job: pods with completion indexes [$got], want [$want_idx] (parallelism $parallelism)"
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
say "runpod ${rt:-(podman default runtime)}"
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
declare -A ran=() running=() started_at=()
deadline=$(($(date +%s) + limit))
npods=0
max_at_once=0
allsel="pab.dev/batch in ($batch,$failbatch)"
njobs=$((${#tasks[@]} + 1))
batch_t0=$(date +%s.%N)
# finish POD PID: waits for its runpod, reports it and patches its status back
finish() {
	local p=$1 pid=$2 rc=0 pe
	wait "$pid" || rc=$?
	pe=$(date +%s.%N)
	if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
		tail -n 30 "$work/pods/$p.runpod.log" >&2
		fail "runpod $p: exit $rc (its own error)"
	fi
	say "pod $p: $(jq -r '.status.phase' "$work/pods/$p.status.json") after $(awk -v a="$pe" -v b="${started_at[$p]}" 'BEGIN { printf "%.1f", a - b }')s (runpod exit $rc); $(jq -r '[.status.initContainerStatuses[]?, .status.containerStatuses[]? | "\(.name)=\(.state.terminated.exitCode // "?")"] | join(" ")' "$work/pods/$p.status.json")"
	echo "${started_at[$p]} $pe" >>"$work/pod-times"
	patch_status "$p" "$work/pods/$p.status.json" || fail "patch the status of pod $p"
}
while :; do
	# pods that ended
	for p in "${!running[@]}"; do
		if ! kill -0 "${running[$p]}" 2>/dev/null; then
			pid=${running[$p]}
			unset "running[$p]"
			runpod_pids=("${running[@]}")
			finish "$p" "$pid"
		fi
	done
	kubectl get jobs -l "$allsel" -o json >"$work/jobs.json"
	done_jobs=$(jq '[.items[] | select(any(.status.conditions[]?; (.type == "Complete" or .type == "Failed") and .status == "True"))] | length' "$work/jobs.json")
	[ "$done_jobs" = "$njobs" ] && [ ${#running[@]} = 0 ] && break
	[ "$(date +%s)" -lt "$deadline" ] || fail "the Jobs did not finish in ${limit}s"
	kubectl get pods -l "$allsel" -o json >"$work/pods.json"
	mapfile -t pending < <(jq -r '.items[] | select(.status.phase == "Pending" and .metadata.deletionTimestamp == null) |
		.metadata.name' "$work/pods.json")
	for p in "${pending[@]}"; do
		[ -z "${ran[$p]:-}" ] || continue
		ran[$p]=1
		npods=$((npods + 1))
		# the scheduler's part: bind the pod to the node (pods/binding)
		printf '{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "%s"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "%s"}}\n' \
			"$p" "$node" >"$work/pods/$p.binding.json"
		api_post "/api/v1/namespaces/$ns/pods/$p/binding" "$work/pods/$p.binding.json" >/dev/null || fail "bind pod $p to $node"
		kubectl get pod "$p" -o json >"$work/pods/$p.json"
		idx=$(jq -r '.metadata.annotations["batch.kubernetes.io/job-completion-index"]' "$work/pods/$p.json")
		started_at[$p]=$(date +%s.%N)
		# in the background, so that pods run at once, and a signal reaches the trap,
		# which stops every runpod (each removes its podman pod) before $work is removed
		"$runpod" --status-file "$work/pods/$p.status.json" --secrets "$work/secrets.json" \
			--logs "$work/pods/$p.logs" --timeout 10m "${runtime_args[@]}" "$work/pods/$p.json" \
			>"$work/pods/$p.runpod.log" 2>&1 &
		running[$p]=$!
		runpod_pids=("${running[@]}")
		[ ${#running[@]} -gt "$max_at_once" ] && max_at_once=${#running[@]}
		say "pod $p (index $idx, node $(jq -r .spec.nodeName "$work/pods/$p.json")): runpod started; ${#running[@]} running"
	done
	sleep 0.5
done
batch_t1=$(date +%s.%N)
kubectl get jobs -l "$allsel" -o json >"$work/jobs.json"
say "ran $npods pods, at most $max_at_once at once; the Jobs:"
jq -r '.items[] | "  \(.metadata.name): completions \(.status.succeeded // 0)/\(.spec.completions), failed \(.status.failed // 0), completedIndexes \(.status.completedIndexes // "-"), failedIndexes \(.status.failedIndexes // "-"), conditions \([.status.conditions[]? | select(.status == "True") | .type] | join(","))"' \
	"$work/jobs.json" | sed 's/^/k8s-test:/' >&2
[ "$max_at_once" -ge 2 ] || fail "at most $max_at_once pod ran at once: the pods did not run concurrently"
# the most pods whose runs overlapped in time (from their start and end times)
overlap=$(sort -n "$work/pod-times" | awk '{ s[NR] = $1; e[NR] = $2 } END { m = 0; for (i = 1; i <= NR; i++) { n = 0; for (j = 1; j <= NR; j++) if (s[j] <= s[i] && e[j] > s[i]) n++; if (n > m) m = n } print m }')
[ "$overlap" -ge 2 ] || fail "no two pods ran at the same time"
nruns=$((${#tasks[@]} * repeat))
wall=$(awk -v a="$batch_t1" -v b="$batch_t0" 'BEGIN { printf "%.1f", a - b }')
say "throughput: $((nruns + 1)) pods ($nruns runs and the failing one) in ${wall}s, up to $overlap at once, a pod $(awk '{ t += $2 - $1 } END { printf "%.1f", t / NR }' "$work/pod-times")s on average: $(awk -v n=$((nruns + 1)) -v w="$wall" 'BEGIN { printf "%d", n * 3600 / w }') runs/hour on this machine ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
# the controller counted every pod and removed its job-tracking finalizer itself
left=$(kubectl get pods -l "$allsel" -o json | jq '[.items[] | select((.metadata.finalizers // []) | length > 0)] | length')
[ "$left" = 0 ] || fail "$left pods still carry a finalizer after their Job finished"
for t in "${tasks[@]}"; do
	jq -e --arg j "$batch-$t" --argjson n "$repeat" '.items[] | select(.metadata.name == $j) |
		select(.status.succeeded == $n and any(.status.conditions[]?; .type == "Complete" and .status == "True"))' \
		"$work/jobs.json" >/dev/null || fail "Job $batch-$t is not Complete with $repeat completions"
done
jq -e --arg j "$failbatch-${tasks[0]}" '.items[] | select(.metadata.name == $j) |
	select(.status.failedIndexes == "0" and any(.status.conditions[]?; .type == "Failed" and .status == "True"))' \
	"$work/jobs.json" >/dev/null || fail "Job $failbatch-${tasks[0]} is not Failed with failedIndexes 0"

# --- 6. as docs/deploy.md: wait, status, collect, grade ---
step "kubectl wait; pab k8s status and collect (through the API server's pods/log)"
kubectl wait --for=condition=complete job -l "pab.dev/batch=$batch" --timeout=60s >&2 ||
	fail "kubectl wait --for=condition=complete"
"$pab" k8s status "$batch" --out "$work/runs/$batch" >"$work/status-before.txt" || fail "pab k8s status $batch"
sed 's/^/k8s-test:   /' "$work/status-before.txt" >&2
grep -q "runs: $nruns finished ($nruns not collected)" "$work/status-before.txt" || fail "pab k8s status: want $nruns runs not collected"
"$pab" k8s collect "$batch" --out "$work/runs/$batch" >"$work/collect.txt" 2>&1 ||
	{ cat "$work/collect.txt" >&2; fail "pab k8s collect $batch"; }
sed 's/^/k8s-test:   /' "$work/collect.txt" >&2
[ "$(grep -c '^collected .* from pod ' "$work/collect.txt")" = "$nruns" ] || fail "pab k8s collect: want $nruns runs collected"
grep -q "runs: $nruns finished (0 not collected)" "$work/collect.txt" || fail "pab k8s collect left runs"
"$pab" k8s collect "$batch" --out "$work/runs/$batch" >"$work/collect2.txt" 2>&1 || fail "pab k8s collect (again)"
grep -q '^collected 0 run(s) now' "$work/collect2.txt" || fail "a second pab k8s collect fetched runs again"
"$pab" k8s status "$failbatch" --out "$work/runs/$failbatch" >"$work/status-fail.txt" || fail "pab k8s status $failbatch"
sed 's/^/k8s-test:   /' "$work/status-fail.txt" >&2
grep -q "^failed: ${tasks[0]}/1 (index 0), pod $failbatch-${tasks[0]}-0-" "$work/status-fail.txt" ||
	fail "pab k8s status does not report the failed index"
awk -v j="$failbatch-${tasks[0]}" '$1 == j && $6 == "0" && $7 ~ /Failed/ { ok = 1 } END { exit !ok }' "$work/status-fail.txt" ||
	fail "pab k8s status: want FAILED-IX 0 and the Failed condition for $failbatch-${tasks[0]}"
"$pab" k8s collect "$failbatch" --out "$work/runs/$failbatch" >"$work/collect-fail.txt" 2>&1 ||
	{ cat "$work/collect-fail.txt" >&2; fail "pab k8s collect $failbatch"; }
[ -f "$work/runs/$failbatch/${tasks[0]}/1/run.json" ] || fail "the failed run was not collected"
say "the failed run, collected: $(tr -d '\n ' <"$work/runs/$failbatch/${tasks[0]}/1/run.json"); agent.stderr: $(tail -n 1 "$work/runs/$failbatch/${tasks[0]}/1/agent.stderr" 2>/dev/null || echo -)"

step "the Secret's key: in each agent, in no log and no run file"
for d in "$work/runs/$batch"/*/*/; do
	grep -q "refagent: env PAB_TEST_KEY sha256 $secret_digest" "$d/agent.stdout" ||
		fail "$d: the agent did not get the key (agent.stdout: $(head -c 300 "$d/agent.stdout"))"
done
if grep -rl -- "$secret_value" "$work/runs" "$work/pods" "$work/collect.txt" "$work/status-before.txt" \
	"$work/kube-apiserver.log" "$work/kube-controller-manager.log" 2>/dev/null | grep -v '/secrets.json$'; then
	fail "the key's value is in the files above"
fi
# the pods as the API server holds them: the key by reference in the agent container only
n_agent_refs=$(jq -s '[.[] | .spec.containers[] | select(.name == "agent") | (.env // [])[] | select(.valueFrom.secretKeyRef.name == "pab-test-key")] | length' \
	$(ls "$work/pods/$batch"-*.json | grep -v '\.\(status\|binding\)\.json$'))
[ "$n_agent_refs" = "$nruns" ] || fail "$n_agent_refs agent containers refer to the Secret, want $nruns"
jq -e -s '[.[] | .spec.initContainers[]?, .spec.containers[] | select(.name != "agent") | (.env // [])[] |
	select(.valueFrom.secretKeyRef)] | length == 0' $(ls "$work/pods/$batch"-*.json | grep -v '\.\(status\|binding\)\.json$') >/dev/null ||
	fail "a container other than the agent has a secretKeyRef"
say "the key reached all $nruns agents (sha256 ${secret_digest:0:16}...) and is in no container log, run file or control-plane log"

step "grade: pab run --collect"
"$pab" --repo "$root" run --collect "$work/runs/$batch" --judge cli --judge-cmd "$root/docs/examples/judge.sh" \
	--label refagent-k8s >&2 || fail "pab run --collect $work/runs/$batch"
sum=$work/runs/$batch/summary.json
jq -r '.runs[] | "  \(.task)/\(.repeat): \(.status), score \(.score), \(.pages) page(s), \(.requests) requests (exact \(.exact * 100 | round)%, fuzzy \(.fuzzy * 100 | round)%, miss \(.miss * 100 | round)%)"' "$sum" |
	sed 's/^/k8s-test:/' >&2
runs=$(jq '.runs | length' "$sum")
good=$(jq '[.runs[] | select(.status == "graded" and .score == 1 and .passed == true)] | length' "$sum")
[ "$runs" = "$nruns" ] || fail "summary.json has $runs runs, want $nruns"
[ "$good" = "$nruns" ] || fail "$good of $nruns runs graded with score 1"
print_steps
say "PASS: $nruns runs from the Job controller's pods ($overlap at once), collected from their logs through the API server with no PVC, all graded, score 1; the failed index reported"
