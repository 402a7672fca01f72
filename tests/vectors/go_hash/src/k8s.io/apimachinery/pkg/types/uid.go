// Package types mirrors k8s.io/apimachinery/pkg/types for the one type the
// vector generator needs. The package NAME must stay "types": spew prints it.
package types

type UID string
