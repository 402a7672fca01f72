//! The EndpointSlice reconciler.
