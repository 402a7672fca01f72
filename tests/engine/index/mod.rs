//! The index: stores, the selector cache and member sets (also against brute-force scans on random
//! event sequences), and upstream's pod projection rules.

mod common;
mod lookups;
mod projection;
mod random;
mod stores;
