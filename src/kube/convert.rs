//! Conversions between k8s-openapi objects and the model.
