//! The in-memory API server.
