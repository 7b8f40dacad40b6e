//go:build kubetools

// Package kube pins the Kubernetes commands that deploy/kube-build.sh builds. The build
// tag keeps the file out of every ordinary build; `go mod tidy -tags kubetools` (run by
// hand when the version changes) reads these imports to fill go.mod and go.sum.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
