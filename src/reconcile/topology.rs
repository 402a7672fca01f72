//! Topology-aware hints and traffic distribution.
