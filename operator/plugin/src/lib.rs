//! kubectl-bloodraven (work in progress).
