//! Loading Kubernetes objects from YAML and JSON files.
