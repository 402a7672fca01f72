//! Fuzzing with proptest: hostile inputs to the object decoders and to the reconcilers, derived
//! from real objects by byte and structure mutations, and to the other loaders and parsers a user
//! feeds (trace files, cluster specs, durations, CPU quantities). Nothing may panic or hang; a
//! decoder either reads an object or says which file, document and field it could not read; a
//! reconcile of what it read, run again on its own result, writes nothing; a trace that loads
//! replays to its end.
//!
//! CI runs a few hundred cases per target. For a longer run after changing the core:
//! `PROPTEST_CASES=200000 cargo test --release --test engine properties::fuzz` (see perf/README.md); after
//! changing a loader, `PROPTEST_CASES=20000 cargo test --release --test engine properties::fuzz::loaders`
//! (about a minute).

mod corpus;
mod decoders;
mod loaders;
mod reconcilers;
