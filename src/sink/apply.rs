//! Carrying out a plan with upstream ordering and error rules.
