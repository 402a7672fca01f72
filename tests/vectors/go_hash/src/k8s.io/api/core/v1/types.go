// Package v1 mirrors the subset of k8s.io/api/core/v1 that upstream hashes
// when sorting Endpoints ports and subsets. The package NAME ("v1"), the type
// names, the field names, the field ORDER and the field types must match
// upstream exactly, because spew's "%#v" output (and so the hash) includes them.
// Checked against kubernetes/kubernetes staging/src/k8s.io/api/core/v1/types.go.
// JSON tags are upstream's too, so encoding/json gives the API form.
package v1

import "k8s.io/apimachinery/pkg/types"

type Protocol string

const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
)

type ObjectReference struct {
	Kind            string    `json:"kind,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name,omitempty"`
	UID             types.UID `json:"uid,omitempty"`
	APIVersion      string    `json:"apiVersion,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	FieldPath       string    `json:"fieldPath,omitempty"`
}

type EndpointSubset struct {
	Addresses         []EndpointAddress `json:"addresses,omitempty"`
	NotReadyAddresses []EndpointAddress `json:"notReadyAddresses,omitempty"`
	Ports             []EndpointPort    `json:"ports,omitempty"`
}

type EndpointAddress struct {
	IP        string           `json:"ip"`
	Hostname  string           `json:"hostname,omitempty"`
	NodeName  *string          `json:"nodeName,omitempty"`
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

type EndpointPort struct {
	Name        string   `json:"name,omitempty"`
	Port        int32    `json:"port"`
	Protocol    Protocol `json:"protocol,omitempty"`
	AppProtocol *string  `json:"appProtocol,omitempty"`
}
