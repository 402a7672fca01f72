//! The thin adapter to the Kubernetes API types.

pub mod api_sink;
pub mod convert;
pub mod debug_dns;
pub mod http;
pub mod launch;
pub mod lease;
pub mod manifest;
pub mod pools;
pub mod protobuf;
pub mod protobuf_source;
pub mod run;
pub mod shadow;
pub mod trace_file;
pub mod trace_record;
pub mod watch;
