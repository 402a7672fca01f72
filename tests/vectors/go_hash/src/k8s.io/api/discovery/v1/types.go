// Package v1 mirrors discovery.k8s.io/v1 EndpointPort (k8s.io/api/discovery/v1).
// As for the core package, the package NAME ("v1"), type and field names,
// field order and field types must match upstream exactly.
// Checked against kubernetes/kubernetes staging/src/k8s.io/api/discovery/v1/types.go.
package v1

import v1 "k8s.io/api/core/v1"

type EndpointPort struct {
	Name        *string      `json:"name,omitempty"`
	Protocol    *v1.Protocol `json:"protocol,omitempty"`
	Port        *int32       `json:"port,omitempty"`
	AppProtocol *string      `json:"appProtocol,omitempty"`
}
