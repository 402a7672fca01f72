//! The compact model: owned types that keep only what reconciling needs. Strings are interned,
//! IPs parsed once. Conversions from and to Kubernetes API objects live in `crate::kube`.

mod compact;
mod intern;
mod labels;
mod load_balancer;
mod objects;
mod slice;

pub(crate) use compact::{PackedTime, uuid_ascii};
pub use compact::{PodIps, ResourceVersion, Uid, compare_resource_versions};
pub use intern::{Name, intern, interned_count};
pub use labels::Labels;
pub use load_balancer::*;
pub use objects::*;
pub use slice::*;

/// A point in time, as the API server writes it.
pub type Timestamp = jiff::Timestamp;

/// Label and annotation keys and values that must match upstream byte for byte.
pub mod keys {
    pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
    pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
    pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
    pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
    pub const LABEL_CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
    pub const LABEL_MASTER: &str = "node-role.kubernetes.io/master";
    pub const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
    pub const ANNOTATION_TOPOLOGY_AWARE_HINTS: &str = "service.kubernetes.io/topology-aware-hints";
    pub const ANNOTATION_TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
    /// The managed-by value of the EndpointSlice controller.
    pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";
    /// The managed-by value of the EndpointSlice mirroring controller's slices.
    pub const MIRRORING_CONTROLLER: &str = "endpointslicemirroring-controller.k8s.io";
    /// Set on every Endpoints the Endpoints controller writes (Kubernetes 1.33 and later); the API
    /// server skips its IP warnings for such objects.
    pub const LABEL_ENDPOINTS_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
    /// The Endpoints controller's value of [`LABEL_ENDPOINTS_MANAGED_BY`].
    pub const ENDPOINTS_CONTROLLER: &str = "endpoint-controller";
}
