//! The RLN depth-20 circuit zerokit ships (single message id): its witness graph and proving
//! key, prepared once per process for [`CircomProver`].
//!
//! The two files are vendored in `prover/resources/rln-depth20/` (SHA-256 in `SHA256SUMS`): they
//! are byte-identical in rln 2.0.2 (what nwaku links) and rln 3.0.0, and the proofs made with
//! them verify under the verifying key every RLN node uses. Vendoring, rather than reading them
//! from the `rln` crate, keeps that crate's C symbols out of anything linked with this one.

use std::sync::Arc;

use ark_bn254::{Bn254, Fr};
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_serialize::CanonicalDeserialize;

use crate::{CircomProver, ProverConfig, ProverError, Row, WitnessGraph};

/// zerokit's `resources/tree_depth_20/graph.bin`: the circuit's witness graph.
pub const GRAPH: &[u8] = include_bytes!("../resources/rln-depth20/graph.bin");

/// zerokit's `resources/tree_depth_20/rln_final.arkzkey`: the proving key and the constraint
/// matrices, arkworks-serialized uncompressed (the ark-zkey layout).
pub const ARKZKEY: &[u8] = include_bytes!("../resources/rln-depth20/rln_final.arkzkey");

/// A proving key with the shape of its circuit, as an arkzkey file holds them.
#[derive(Debug, Clone)]
pub struct Zkey {
    /// The Groth16 proving key (its `vk` is the network's verifying key).
    pub pk: ProvingKey<Bn254>,
    /// Public wires, the constant 1 included.
    pub num_instance_variables: usize,
    /// The constraints' A rows.
    pub a: Vec<Row>,
    /// The constraints' B rows.
    pub b: Vec<Row>,
}

impl Zkey {
    /// Parses an arkzkey: the proving key, then six counts and the A, B, C matrices, all
    /// arkworks-uncompressed and, as zerokit reads them, without subgroup checks (the file is
    /// the trusted setup's output, embedded at build time or handed over by the caller).
    ///
    /// # Errors
    /// [`ProverError::KeyShape`] for bytes that are empty, truncated or not an arkzkey.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProverError> {
        if bytes.is_empty() {
            return Err(ProverError::KeyShape("empty zkey bytes".into()));
        }
        let mut cursor = bytes;
        let c = &mut cursor;
        // The proving key field by field (ark-groth16's order), so that every length prefix is
        // checked against the bytes left before anything is allocated for it: arkworks' own
        // `Vec` decoder reserves whatever a prefix says, and a hostile prefix would abort.
        let vk = VerifyingKey::<Bn254> {
            alpha_g1: item(c)?,
            beta_g2: item(c)?,
            gamma_g2: item(c)?,
            delta_g2: item(c)?,
            gamma_abc_g1: items(c, G1_LEN)?,
        };
        let pk = ProvingKey::<Bn254> {
            vk,
            beta_g1: item(c)?,
            delta_g1: item(c)?,
            a_query: items(c, G1_LEN)?,
            b_g1_query: items(c, G1_LEN)?,
            b_g2_query: items(c, G2_LEN)?,
            h_query: items(c, G1_LEN)?,
            l_query: items(c, G1_LEN)?,
        };
        let mut counts = [0usize; 6];
        for count in &mut counts {
            *count = item(c)?;
        }
        let a = matrix(c)?;
        let b = matrix(c)?;
        // C is not needed (circom's reduction), but it must be there: a file cut short is refused.
        let _c = matrix(c)?;
        Ok(Self {
            pk,
            num_instance_variables: counts[0],
            a,
            b,
        })
    }

    /// Refuses a graph that computes another number of wires than the key has.
    ///
    /// # Errors
    /// [`ProverError::KeyShape`].
    pub fn check_graph(&self, graph: &WitnessGraph) -> Result<(), ProverError> {
        if graph.wires() == self.pk.a_query.len() {
            Ok(())
        } else {
            Err(ProverError::KeyShape(format!(
                "the graph computes {} wires, the key has {}",
                graph.wires(),
                self.pk.a_query.len()
            )))
        }
    }
}

/// Bytes of an uncompressed G1 / G2 point.
const G1_LEN: usize = 64;
const G2_LEN: usize = 128;

fn bad(e: ark_serialize::SerializationError) -> ProverError {
    ProverError::KeyShape(format!("arkzkey: {e}"))
}

/// One value, uncompressed and unchecked (as zerokit reads the file it embeds).
fn item<T: CanonicalDeserialize>(cursor: &mut &[u8]) -> Result<T, ProverError> {
    T::deserialize_uncompressed_unchecked(cursor).map_err(bad)
}

/// A list's length prefix, refused (before anything is allocated for it) when the remaining
/// bytes cannot hold that many entries of at least `min_len` bytes each; `what` names the entries.
fn list_len(cursor: &mut &[u8], min_len: usize, what: &str) -> Result<usize, ProverError> {
    let len: u64 = item(cursor)?;
    usize::try_from(len)
        .ok()
        .filter(|&n| n <= cursor.len() / min_len.max(1))
        .ok_or_else(|| {
            ProverError::KeyShape(format!("arkzkey: {len} {what} in {} bytes", cursor.len()))
        })
}

/// A length-prefixed list of values of at least `min_len` bytes each.
fn items<T: CanonicalDeserialize>(
    cursor: &mut &[u8],
    min_len: usize,
) -> Result<Vec<T>, ProverError> {
    let len = list_len(cursor, min_len, "items")?;
    (0..len).map(|_| item(cursor)).collect()
}

/// A constraint matrix: rows (each a list with its own 8-byte length) of (coefficient, wire).
fn matrix(cursor: &mut &[u8]) -> Result<Vec<Row>, ProverError> {
    let rows = list_len(cursor, 8, "rows")?;
    (0..rows)
        .map(|_| items::<(Fr, usize)>(cursor, 40))
        .collect()
}

/// The circuit's witness graph and the prover tables of its proving key.
#[derive(Debug, Clone)]
pub struct RlnCircuit {
    /// Computes the full assignment from the circuit's named inputs.
    pub graph: Arc<WitnessGraph>,
    /// Proves from a full assignment.
    pub prover: Arc<CircomProver>,
}

impl RlnCircuit {
    /// Parses the embedded graph and key and builds the tables with [`ProverConfig::default`]
    /// (about a second on two cores; ~63 MiB).
    ///
    /// # Errors
    /// A malformed graph or proving key (neither happens with the embedded files; the checks
    /// are the same as for any key).
    pub fn load() -> Result<Self, ProverError> {
        Self::load_with(&ProverConfig::default())
    }

    /// [`load`](Self::load) with the tables fitted to `config`.
    ///
    /// # Errors
    /// As [`load`](Self::load); [`ProverError::TableBudget`] for a budget too small.
    pub fn load_with(config: &ProverConfig) -> Result<Self, ProverError> {
        Self::from_bytes(ARKZKEY, GRAPH, config)
    }

    /// A circuit from an arkzkey and a witness graph given as bytes (zerokit's
    /// `new_with_params`).
    ///
    /// # Errors
    /// A malformed key or graph, or a graph that computes a different number of wires than the
    /// key has.
    pub fn from_bytes(
        zkey: &[u8],
        graph: &[u8],
        config: &ProverConfig,
    ) -> Result<Self, ProverError> {
        let graph = WitnessGraph::from_bytes(graph)?;
        let zkey = Zkey::from_bytes(zkey)?;
        Self::from_parsed(&zkey, graph, config)
    }

    /// A circuit from a parsed key and graph: the tables are built here (the slow part, which a
    /// caller may run on another thread once [`Zkey::check_graph`] has passed).
    ///
    /// # Errors
    /// As [`Zkey::check_graph`]; the table errors of [`CircomProver::with_config`].
    pub fn from_parsed(
        zkey: &Zkey,
        graph: WitnessGraph,
        config: &ProverConfig,
    ) -> Result<Self, ProverError> {
        zkey.check_graph(&graph)?;
        Self::with_shared_graph(zkey, &Arc::new(graph), config)
    }

    /// A circuit whose graph another circuit of the same key shares (one prover with tables,
    /// one without, say); the graph must have passed [`Zkey::check_graph`] for `zkey`.
    ///
    /// # Errors
    /// The table errors of [`CircomProver::with_config`].
    pub fn with_shared_graph(
        zkey: &Zkey,
        graph: &Arc<WitnessGraph>,
        config: &ProverConfig,
    ) -> Result<Self, ProverError> {
        let prover = CircomProver::with_config(
            &zkey.pk,
            &zkey.a,
            &zkey.b,
            zkey.num_instance_variables,
            config,
        )?;
        Ok(Self {
            graph: Arc::clone(graph),
            prover: Arc::new(prover),
        })
    }
}
