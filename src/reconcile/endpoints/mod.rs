//! The Endpoints controller: one v1 Endpoints object per selector Service, subsets repacked into
//! upstream's canonical order.
