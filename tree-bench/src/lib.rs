//! Shared helpers for Canopy's benchmarks (inputs that every bench uses the same way).
