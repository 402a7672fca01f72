//! The work queue.
