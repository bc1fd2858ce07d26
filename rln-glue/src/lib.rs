//! RLN glue for Canopy trees: RLN primitives, witness inputs and zerokit interop.
//!
//! Nothing is implemented here yet; the work is tracked by the rln-glue issue. The crate exists so
//! the workspace layout is fixed from the start.
