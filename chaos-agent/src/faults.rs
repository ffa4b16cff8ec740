//! The faults, one module each (style rule 12).

pub mod freeze;
pub mod kill;
pub mod partition;
pub mod stop_node;
