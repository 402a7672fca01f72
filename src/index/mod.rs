//! Lock-sharded indexes of services, pods, nodes and slices, and the selector cache.
