#!/usr/bin/env bash
# Build the e2e control plane from the Go module proxy (no Docker, no release downloads):
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, ray-operator, kwok,
#   the next and the older ray-operators (bin/ray-operator-<version>: KUBERAY_NEXT_VERSION,
#   KUBERAY_OLDER_VERSIONS), Argo CD (bin/argocd: four of its commands in one binary),
#   Flux's kustomize-controller (bin/kustomize-controller), Helm 4 (bin/helm), kustomize (bin/kustomize),
#   actionlint (bin/actionlint: the release workflow's linter),
#   and redis-server from the Debian package (Argo CD's cache; installed when root and missing)
# into ${RAYGITOPS_E2E_CACHE:-$HOME/.cache/raygitops-e2e}/<E2E_VERSIONS_KEY>/bin.
# Versions come from versions.env (the only place they are pinned). Idempotent: a binary
# whose stamp file exists is not rebuilt, so a warm run takes a second.
# Per-component build times: <cache>/build-times.log; build output: <cache>/logs/<name>.log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "build.sh: Go toolchain not found (need go >= 1.24)" >&2; exit 1; }

cache=${RAYGITOPS_E2E_CACHE:-$HOME/.cache/raygitops-e2e}/$E2E_VERSIONS_KEY
bin=$cache/bin src=$cache/src stamps=$cache/stamps logs=$cache/logs share=$cache/share
mkdir -p "$bin" "$src" "$stamps" "$logs" "$share"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false} -p=2"

# step NAME VERSION FUNCTION [OUTPUT]: run FUNCTION unless the stamp for NAME holds VERSION
# and OUTPUT (default: bin/NAME) exists.
step() {
  local name=$1 version=$2 fn=$3 output=${4:-$bin/$1} start=$SECONDS
  if [[ -f $stamps/$name && $(<"$stamps/$name") == "$version" && -e $output ]]; then
    echo "build.sh: $name $version up to date"; return 0
  fi
  echo "build.sh: building $name $version (log: $logs/$name.log)"
  if ! ("$fn" >"$logs/$name.log" 2>&1); then
    echo "build.sh: $name FAILED; last lines of $logs/$name.log:" >&2
    tail -n 25 "$logs/$name.log" >&2
    return 1
  fi
  echo "$(date -u +%FT%TZ) $name $version $((SECONDS - start))s" | tee -a "$cache/build-times.log"
  echo "$version" >"$stamps/$name"
}

# --- etcd: its server/go.mod replaces its siblings, so build it from a throwaway module.
build_etcd() {
  mkdir -p "$src/etcd" && cd "$src/etcd"
  [[ -f go.mod ]] || go mod init local/etcdbuild
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

# --- Kubernetes: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
# with ./staging/...; replaces only count in the main module, so a throwaway module replaces
# every required staging module with its release (v1.X.Y <-> v0.X.Y).
build_kube_module() {
  mkdir -p "$src/kubernetes" && cd "$src/kubernetes"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module local/kubebuild"
    echo "go 1.24.0"
    echo "godebug default=go1.24"  # as upstream's go.mod
    echo "replace ("
    awk '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// {print "\t" $1 " => " $1 " '"$KUBERNETES_STAGING_VERSION"'"}' "$gomod"
    echo ")"
  } >go.mod
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBERNETES_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$KUBERNETES_VERSION" \
    "k8s.io/kubernetes/cmd/kubectl@$KUBERNETES_VERSION"
}

kube_ldflags() {  # so that `--version` / `kubectl version` tell the truth
  local v=${KUBERNETES_VERSION#v} kv f="-s -w"
  local built
  built=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBERNETES_VERSION.info")
  for kv in "gitVersion=$KUBERNETES_VERSION" "gitMajor=${v%%.*}" "gitMinor=$(cut -d. -f2 <<<"$v")" \
            gitTreeState=clean "buildDate=$built"; do
    f="$f -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  echo "$f"
}

kube_build() {  # kube_build CMD
  cd "$src/kubernetes"
  go build -trimpath -ldflags "$(kube_ldflags)" -o "$bin/$1" "k8s.io/kubernetes/cmd/$1"
}
build_kube_apiserver() { kube_build kube-apiserver; }
build_kubectl() { kube_build kubectl; }
build_kube_controller_manager() { kube_build kube-controller-manager; }
build_kube_scheduler() { kube_build kube-scheduler; }

# --- ray-operator and kwok: no replace directives, every dependency is served by the proxy
# (checked with `go mod download MOD@VER`), so `go install pkg@version` works.
build_ray_operator() {
  GOBIN=$bin go install -trimpath -ldflags "-s -w" "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
}
# Every other ray-operator (bin/ray-operator-<version>), from a throwaway module: KubeRay up to
# v1.3.x has replace directives in its go.mod, and `go install pkg@version` refuses a module
# with any. The throwaway module copies the operator's `go` line and its replaces (they only
# count in the main module), so the build resolves what the operator's own build resolves.
build_ray_operator_at() {  # KUBERAY_BUILD_VERSION=vX.Y.Z build_ray_operator_at
  local version=$KUBERAY_BUILD_VERSION gomod
  mkdir -p "$src/kuberay-$version" && cd "$src/kuberay-$version"
  gomod=$(go mod download -json "github.com/ray-project/kuberay/ray-operator@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module local/kuberaybuild"
    awk '$1 == "go" {print; exit}' "$gomod"
    awk '/^replace[ \t]*\($/ {block = 1} block || /^replace[ \t]/ {print} block && /^\)/ {block = 0}' "$gomod"
  } >go.mod
  rm -f go.sum
  go get "github.com/ray-project/kuberay/ray-operator@$version"
  go build -trimpath -ldflags "-s -w" -o "$bin/ray-operator-$version" github.com/ray-project/kuberay/ray-operator
}
ray_operator_at() {  # step for one more operator version
  KUBERAY_BUILD_VERSION=$1 step "ray-operator-$1" "$1" build_ray_operator_at
}
older_operators() {  # older_operators 0|1: every other one of KUBERAY_OLDER_VERSIONS (one half a lane)
  local i=0 version
  for version in $KUBERAY_OLDER_VERSIONS; do
    if (( i++ % 2 == $1 )); then ray_operator_at "$version"; fi
  done
}
# The CRDs of a KubeRay that is never run (KUBERAY_UNSUPPORTED_VERSION): its module in GOMODCACHE,
# where controlplane.kuberay_crd_dir finds every operator's CRDs.
download_kuberay_unsupported() {
  go mod download "github.com/ray-project/kuberay/ray-operator@$KUBERAY_UNSUPPORTED_VERSION"
}
build_helm() {  # the version as Helm's Makefile stamps it (else `helm version` says v4.3)
  GOBIN=$bin go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
}
build_kustomize() {
  GOBIN=$bin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
}
# The binaries the image carries (tests/image/build.sh feeds them to the Dockerfile) were built
# from the pinned module (its go.sum hash, checked against sum.golang.org when downloaded):
# `go version -m` reads it from the binary. Checked on every run (milliseconds).
check_module_sum() {  # check_module_sum BINARY MODULE VERSION SUM
  go version -m "$bin/$1" | grep -qP "^\tmod\t$2\t$3\t\Q$4\E\$" ||
    { echo "build.sh: $bin/$1 is not $2 $3 $4 (versions.env): remove its stamp and build again" >&2; return 1; }
}
build_actionlint() {  # the version stamped as its Makefile does (else `actionlint -version` says unknown)
  GOBIN=$bin go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" \
    "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
}
build_kwok() {
  GOBIN=$bin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}
# kwok's own pod stages, for a control plane that changes one of them (Job pods run for real)
copy_kwok_stages() {
  local module
  module=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$share/kwok-stages" && mkdir -p "$share/kwok-stages"
  cp "$module"/kustomize/stage/pod/fast/pod-*.yaml "$share/kwok-stages/"
}

# --- Argo CD: its go.mod replaces many modules and it needs a newer Go than the machine's, so
# it builds from the module pinned in tests/e2e/argocd/ (go.sum holds every hash) with
# GOTOOLCHAIN fetching the toolchain from the proxy. One small main dispatches to the four
# commands' cobra constructors: application-controller, applicationset-controller, repo-server,
# cmp-server. Its stamp holds a digest of that directory's go.mod, go.sum and main.go, so a
# change to any of them (a command added) builds it anew.
argocd_key() {
  echo "$ARGOCD_VERSION-$ARGOCD_GO_TOOLCHAIN-$(cat "$here/argocd/go.mod" "$here/argocd/go.sum" "$here/argocd/main.go" |
    sha256sum | cut -c1-12)"
}
build_argocd() {
  grep -q "github.com/argoproj/argo-cd/v3 $ARGOCD_VERSION\$" "$here/argocd/go.mod" ||
    { echo "tests/e2e/argocd/go.mod does not require argo-cd $ARGOCD_VERSION (versions.env)"; return 1; }
  mkdir -p "$src/argocd" && cd "$src/argocd"
  cp "$here/argocd/go.mod" "$here/argocd/go.sum" "$here/argocd/main.go" .
  GOTOOLCHAIN=$ARGOCD_GO_TOOLCHAIN go build -mod=readonly -trimpath -ldflags "-s -w" -o "$bin/argocd" .
}
# Files the Argo CD fixture needs from the module at run time: its CRDs, and the git wrapper
# repo-server calls (on PATH).
copy_argocd_share() {
  local module
  module=$(cd "$src/argocd" && GOTOOLCHAIN=$ARGOCD_GO_TOOLCHAIN go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
  rm -rf "$share/argocd" && mkdir -p "$share/argocd/bin"
  cp "$module"/manifests/crds/*-crd.yaml "$share/argocd/"
  install -m 0755 "$module/hack/git-verify-wrapper.sh" "$share/argocd/bin/"
}
# --- Flux kustomize-controller: like Argo CD, from a module pinned in tests/e2e/flux/ (its go.mod
# copies the controller's own replace lines; replaces only count in the main module). Its
# sources come from ExternalArtifact objects (feature gate), so no source-controller binary:
# only the CRDs, from the two modules.
build_kustomize_controller() {
  grep -Eq "github.com/fluxcd/kustomize-controller $FLUX_KUSTOMIZE_CONTROLLER_VERSION( |\$)" "$here/flux/go.mod" ||
    { echo "tests/e2e/flux/go.mod does not require kustomize-controller $FLUX_KUSTOMIZE_CONTROLLER_VERSION"; return 1; }
  mkdir -p "$src/flux" && cd "$src/flux"
  cp "$here/flux/go.mod" "$here/flux/go.sum" .
  go build -mod=readonly -trimpath -ldflags "-s -w" -o "$bin/kustomize-controller" github.com/fluxcd/kustomize-controller
}
copy_flux_share() {
  local kc sc
  kc=$(go mod download -json "github.com/fluxcd/kustomize-controller@$FLUX_KUSTOMIZE_CONTROLLER_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  sc=$(go mod download -json "github.com/fluxcd/source-controller@$FLUX_SOURCE_CONTROLLER_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$share/flux" && mkdir -p "$share/flux"
  # every source kind: kustomize-controller watches them all (its caches never sync without)
  cp "$kc/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml" \
     "$sc"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml "$share/flux/"
}

install_redis() {
  command -v redis-server >/dev/null && return 0
  [[ $(id -u) == 0 ]] || { echo "build.sh: Argo CD needs redis-server (apt-get install redis-server)" >&2; return 1; }
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
}

# Two lanes: the Kubernetes binaries share one module and the build cache; the others
# download and compile meanwhile. Essentials first in each lane.
kube_lane() {
  step kube-module "$KUBERNETES_VERSION" build_kube_module "$src/kubernetes/go.sum"
  step kube-apiserver "$KUBERNETES_VERSION" build_kube_apiserver
  step kubectl "$KUBERNETES_VERSION" build_kubectl
  step kube-controller-manager "$KUBERNETES_VERSION" build_kube_controller_manager
  step kube-scheduler "$KUBERNETES_VERSION" build_kube_scheduler
  # after the Kubernetes binaries: the other lane is still busy for about as long
  step kustomize-controller "$FLUX_KUSTOMIZE_CONTROLLER_VERSION" build_kustomize_controller
  step flux-share "$FLUX_KUSTOMIZE_CONTROLLER_VERSION-$FLUX_SOURCE_CONTROLLER_VERSION-all" copy_flux_share "$share/flux"
  step helm "$HELM_VERSION" build_helm
  step kustomize "$KUSTOMIZE_VERSION" build_kustomize
  step actionlint "$ACTIONLINT_VERSION" build_actionlint
  older_operators 1  # 100-300 s each cold: half of them in each lane
}
other_lane() {
  step etcd "$ETCD_VERSION" build_etcd
  step ray-operator "$KUBERAY_VERSION" build_ray_operator
  step kwok "$KWOK_VERSION" build_kwok
  step kwok-stages "$KWOK_VERSION" copy_kwok_stages "$share/kwok-stages"
  ray_operator_at "$KUBERAY_NEXT_VERSION"
  step argocd "$(argocd_key)" build_argocd
  step argocd-share "$ARGOCD_VERSION" copy_argocd_share "$share/argocd"
  step "kuberay-$KUBERAY_UNSUPPORTED_VERSION" "$KUBERAY_UNSUPPORTED_VERSION" download_kuberay_unsupported \
    "$(go env GOMODCACHE)/github.com/ray-project/kuberay/ray-operator@$KUBERAY_UNSUPPORTED_VERSION"
  older_operators 0
}

start=$SECONDS
install_redis
kube_lane & kube_pid=$!
other_lane & other_pid=$!
status=0
wait "$kube_pid" || status=1
wait "$other_pid" || status=1
if [[ $status == 0 ]]; then
  check_module_sum helm helm.sh/helm/v4 "$HELM_VERSION" "$HELM_MODULE_SUM" || status=1
  check_module_sum kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION" "$KUSTOMIZE_MODULE_SUM" || status=1
fi
echo "build.sh: done in $((SECONDS - start))s, status $status; binaries in $bin"
exit "$status"
