//! Fuzzing with proptest: hostile inputs to the object decoders and to the reconcilers, derived
//! from real objects by byte and structure mutations. Nothing may panic or hang; a decoder either
//! reads an object or says which file, document and field it could not read; a reconcile of what
//! it read, run again on its own result, writes nothing.
//!
//! CI runs a few hundred cases per target. For a longer run after changing the core:
//! `PROPTEST_CASES=200000 cargo test --release --test properties fuzz` (see perf/README.md).

mod corpus;
mod decoders;
mod reconcilers;
