// Package deploy holds Sluice's Kubernetes manifests (a Kustomize base,
// its overlays, a KServe ServingRuntime), the HAProxy configuration of
// replicas on one machine, and the test that checks them without a
// cluster: every overlay is built in process with Kustomize, every object
// decoded strictly into its Go type, and the cross-references checked
// against a running `sluice serve` started with the manifests' own
// arguments (manifests_test.go). It is a module of its own so that the
// Kubernetes modules stay out of the server's.
package deploy
