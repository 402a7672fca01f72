//! The `sliced` binary's commands, driven as a user drives them: `sliced reconcile`'s
//! command-line contract (`reconcile`) and its `--controllers` flag (`controllers`), the synthetic
//! cluster generator behind `sliced simulate` (`sim`), and traces replayed by
//! `sliced simulate --events` (`replay`).

mod controllers;
mod load_balancers;
mod reconcile;
mod replay;
mod sim;
mod tune;
