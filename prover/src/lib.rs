//! Groth16 proving with the proving key's bases fixed for the life of a process.
//!
//! A circom proving key's queries (A, B in G1 and G2, H, L) never change, so each one's
//! multi-scalar multiplication can trade start-up work and memory for per-proof speed:
//! [`FixedBaseMsm`] precomputes every base's window shifts and sums each proof's bucket entries
//! in batch-affine rounds, on AVX-512 IFMA lanes where the CPU has them ([`lanes`]).
//!
//! ```
//! use ark_bn254::{Fr, G1Affine, G1Projective};
//! use ark_ec::{AffineRepr, CurveGroup, PrimeGroup};
//! use prover::{FixedBaseMsm, MsmConfig};
//!
//! let g = G1Projective::generator();
//! let bases: Vec<G1Affine> = (1..=4u64).map(|k| (g * Fr::from(k)).into_affine()).collect();
//! let msm = FixedBaseMsm::new(&bases, MsmConfig::for_bases(bases.len()))?;
//! let scalars = [Fr::from(1u8), Fr::from(0u8), Fr::from(2u8), -Fr::from(1u8)];
//! // 1·1 + 0·2 + 2·3 - 1·4 = 3
//! assert_eq!(msm.msm(&scalars)?.into_affine(), (g * Fr::from(3u8)).into_affine());
//! # Ok::<(), prover::ProverError>(())
//! ```

mod buckets;
mod config;
mod error;
mod fft;
mod fixed_msm;
mod glv;
mod groth16;
#[cfg(feature = "rln")]
pub mod rln;
#[cfg(feature = "test-utils")]
pub mod testing;
pub mod witness;

pub use config::ProverConfig;
pub use error::ProverError;
/// The IFMA lanes the bucket sums run on (the `field-lanes` crate, shared with the hasher).
pub use field_lanes as lanes;
pub use field_lanes::Arithmetic;
pub use fixed_msm::{FixedBaseMsm, MsmConfig, RUN_ENTRIES};
pub use groth16::{CircomProver, PartialParts, PartialProof, Row};
pub use witness::{WitnessError, WitnessGraph};
