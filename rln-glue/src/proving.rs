//! RLN proofs from our trees' witnesses with Canopy's prover (the `prover` crate) on rln 3.0.0's
//! shipped circuit and proving key: the witness graph evaluated by our calculator, the proof by
//! fixed-base MSM tables built once per process. The proofs are standard Groth16 proofs that
//! zerokit's verifier, arkworks' and [`crate::verifier`] accept.

use ark_bn254::Bn254;
use ark_groth16::Proof;
use hasher::Fr;
use prover::rln::RlnCircuit;
/// The prover's start-up choices (table memory budget, arithmetic), as `canopy`'s `[prover]`
/// configuration section and librln's environment take them.
pub use prover::ProverConfig;
use prover::{PartialParts, ProverError};
use rand::{CryptoRng, RngCore};
use zeroize::Zeroizing;

use crate::witness::{PublicValues, RlnWitness, MEMBER_INPUTS};

/// rln 3.0.0's circuit, ready to prove: load once, prove many times (it is `Sync`).
#[derive(Debug, Clone)]
pub struct RlnProver {
    circuit: RlnCircuit,
}

impl RlnProver {
    /// Parses the witness graph and builds the proving key's tables (about a second on two
    /// cores, ~63 MiB).
    ///
    /// # Errors
    /// A malformed graph or key ([`ProverError`]).
    pub fn load() -> Result<Self, ProverError> {
        Self::load_with(&ProverConfig::default())
    }

    /// [`load`](Self::load) with the tables fitted to `config` (memory budget, arithmetic).
    ///
    /// # Errors
    /// As [`load`](Self::load); [`ProverError::TableBudget`] for a budget too small.
    pub fn load_with(config: &ProverConfig) -> Result<Self, ProverError> {
        Ok(Self {
            circuit: RlnCircuit::load_with(config)?,
        })
    }

    /// A prover on `circuit` (one loaded from other bytes, say).
    #[must_use]
    pub fn from_circuit(circuit: RlnCircuit) -> Self {
        Self { circuit }
    }

    /// `partial` in zerokit's form (mask and sums), which is what zerokit serializes.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for a partial of another circuit.
    pub fn partial_parts(&self, partial: &MemberPartial) -> Result<PartialParts, ProverError> {
        self.circuit.prover.partial_parts(&partial.0)
    }

    /// The partial zerokit's form describes (it carries no values, so [`finish`](Self::finish)
    /// cannot check the witness against it).
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for a mask of another circuit.
    pub fn partial_from_parts(&self, parts: &PartialParts) -> Result<MemberPartial, ProverError> {
        Ok(MemberPartial(
            self.circuit.prover.partial_from_parts(parts)?,
        ))
    }

    /// The circuit's witness graph and prover tables (for benchmarks that time the steps).
    #[must_use]
    pub fn circuit(&self) -> &RlnCircuit {
        &self.circuit
    }

    /// Heap bytes of the precomputed tables.
    #[must_use]
    pub fn table_bytes(&self) -> usize {
        self.circuit.prover.table_bytes()
    }

    /// A proof of `witness` with fresh blinding from `rng`, and the public values it proves.
    /// The secret and every wire derived from it are zeroized before returning.
    ///
    /// # Errors
    /// [`ProverError::Witness`] for a witness the circuit refuses (a path of the wrong length).
    pub fn prove<R: RngCore + CryptoRng>(
        &self,
        witness: &RlnWitness,
        rng: &mut R,
    ) -> Result<(Proof<Bn254>, PublicValues), ProverError> {
        self.finish(&MemberPartial::default(), witness, rng)
    }

    /// The part of every proof a member makes that its secret, limit and Merkle path fix
    /// ([`MEMBER_INPUTS`]), for [`finish`](Self::finish): computed once per member and root, it
    /// leaves each message only the wires its signal, epoch and message id change.
    ///
    /// # Errors
    /// As [`prove`](Self::prove).
    pub fn partial(&self, witness: &RlnWitness) -> Result<MemberPartial, ProverError> {
        let inputs = witness.circuit_inputs();
        let member: Vec<(&str, &[Fr])> = inputs
            .iter()
            .filter(|(name, _)| MEMBER_INPUTS.contains(name))
            .map(|(name, values)| (*name, values.as_slice()))
            .collect();
        let known = Zeroizing::new(self.circuit.graph.partial_witness(&member)?);
        Ok(MemberPartial(self.circuit.prover.partial(&known)?))
    }

    /// [`prove`](Self::prove) from a member's [`partial`](Self::partial).
    ///
    /// # Errors
    /// As `prove`, and [`ProverError::PartialMismatch`] when `witness` is not of the member and
    /// path the partial was made for.
    pub fn finish<R: RngCore + CryptoRng>(
        &self,
        partial: &MemberPartial,
        witness: &RlnWitness,
        rng: &mut R,
    ) -> Result<(Proof<Bn254>, PublicValues), ProverError> {
        let z = Zeroizing::new(self.circuit.graph.witness(&witness.circuit_inputs())?);
        let proof = self.circuit.prover.finish(&partial.0, &z, rng)?;
        Ok((proof, witness.public_values()))
    }
}

/// A member's precomputed share of its proofs under one root ([`RlnProver::partial`]); its
/// secret-derived values are zeroized on drop.
#[derive(Debug, Clone, Default)]
pub struct MemberPartial(prover::PartialProof);
