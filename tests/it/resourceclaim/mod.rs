//! The ResourceClaim controller: upstream's table rows and ours, run
//! directly and with the running controller, and the counted scenarios
//! (a failing pod status write, 50 claims of one pod, a 1,000-pod storm).

pub(crate) mod harness;
pub(crate) mod objects;
mod scenarios;
mod table;
mod upgrade;
