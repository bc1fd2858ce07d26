//! What zerokit v2.0.2's stateless `RLN` object does, on Canopy's prover and verifier: witness
//! checks in zerokit's order and with its messages, proofs from the fixed-base tables built once
//! per instance, verification against the verifying key prepared once per instance (zerokit
//! prepares it on every call).

use ark_bn254::{Bn254, Fr};
use ark_ff::{PrimeField, UniformRand};
use ark_groth16::Proof;
use std::sync::{Arc, Mutex};

use prover::rln::{RlnCircuit, Zkey};
use prover::{Arithmetic, PartialParts, ProverConfig, ProverError};
use prover::{CircomProver, WitnessGraph};
use rln_glue::primitives::IdentitySecret;
use rln_glue::proving::RlnProver;
use rln_glue::verifier::RlnVerifier;
use rln_glue::witness::{PublicValues, RlnWitness};

/// Why the RLN object refused (zerokit's `RLNError` / `ProtocolError` cases, same messages).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A witness with a message limit of zero.
    #[error("User message limit cannot be zero")]
    ZeroUserMessageLimit,
    /// Path elements and path index of different lengths.
    #[error("Merkle proof length mismatch: expected {0}, got {1}")]
    InvalidMerkleProofLength(usize, usize),
    /// `message_id >= user_message_limit`.
    #[error("Message id ({0}) is not within user_message_limit ({1})")]
    InvalidMessageId(Fr, Fr),
    /// A path of another length than the circuit's depth.
    #[error(
        "Protocol error: The field {0} has length {1}, but the field tree_depth has length {2}"
    )]
    Depth(&'static str, usize, usize),
    /// The prover failed (a witness the graph refuses).
    #[error("Protocol error: Error producing proof: {0}")]
    Prover(ProverError),
    /// `ffi_rln_new_with_params`: the key, the graph or the two together do not load.
    #[error("ZKey error: {0}")]
    Key(ProverError),
    /// The verifying key is not an RLN key (five public inputs).
    #[error("ZKey error: the verifying key does not have RLN's five public inputs")]
    VerifyingKey,
    /// The pairing check failed.
    #[error("Verification error: Invalid proof provided")]
    InvalidProof,
    /// The proof's root is not among the given ones.
    #[error("Verification error: Expected one of the provided roots")]
    InvalidRoot,
    /// The proof's `x` is not the message's.
    #[error("Verification error: Signal value does not match")]
    InvalidSignal,
    /// Building the prover tables failed (not with the embedded files).
    #[error("ZKey error: prover tables: {0}")]
    Tables(String),
    /// `LIBRLN_ARITHMETIC` names no arithmetic this CPU has.
    #[error("LIBRLN_ARITHMETIC={0}: expected auto, portable or ifma (ifma only on a CPU with AVX-512 IFMA)")]
    Arithmetic(String),
    /// `LIBRLN_TABLE_BUDGET_MIB` is not a whole number of MiB.
    #[error("LIBRLN_TABLE_BUDGET_MIB={0}: expected a whole number of MiB (the prover tables' memory budget)")]
    TableBudget(String),
    /// `LIBRLN_WAIT_FOR_TABLES` is neither 0 nor 1.
    #[error("LIBRLN_WAIT_FOR_TABLES={0}: expected 0 (build the tables in the background) or 1 (before ffi_rln_new returns)")]
    WaitForTables(String),
    /// Two shares with the same `x`.
    #[error("Cannot recover secret: division by zero (shares have the same x value)")]
    DivisionByZero,
}

/// A witness for one message, checked as zerokit's `RLNWitnessInput::new` checks it.
#[derive(Debug, Clone)]
pub struct WitnessInput(pub(crate) RlnWitness);

/// What a member's proofs share under one root (zerokit's `RLNPartialWitnessInput`).
#[derive(Debug, Clone)]
pub struct PartialWitnessInput(pub(crate) RlnWitness);

/// zerokit's checks common to both witnesses.
fn check_member(limit: Fr, path: &[Fr], index: &[u8]) -> Result<(), EngineError> {
    if limit == Fr::from(0u8) {
        return Err(EngineError::ZeroUserMessageLimit);
    }
    if path.len() != index.len() {
        return Err(EngineError::InvalidMerkleProofLength(
            path.len(),
            index.len(),
        ));
    }
    Ok(())
}

impl WitnessInput {
    /// `RLNWitnessInput::new`: limit not zero, path and index of one length, message id below
    /// the limit.
    ///
    /// # Errors
    /// [`EngineError`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        identity_secret: Fr,
        user_message_limit: Fr,
        message_id: Fr,
        path_elements: Vec<Fr>,
        identity_path_index: Vec<u8>,
        x: Fr,
        external_nullifier: Fr,
    ) -> Result<Self, EngineError> {
        check_member(user_message_limit, &path_elements, &identity_path_index)?;
        if message_id.into_bigint() >= user_message_limit.into_bigint() {
            return Err(EngineError::InvalidMessageId(
                message_id,
                user_message_limit,
            ));
        }
        Ok(Self(RlnWitness {
            identity_secret: IdentitySecret::new(identity_secret),
            user_message_limit,
            message_id,
            path_elements,
            identity_path_index,
            x,
            external_nullifier,
        }))
    }
}

impl PartialWitnessInput {
    /// `RLNPartialWitnessInput::new`: limit not zero, path and index of one length.
    ///
    /// # Errors
    /// [`EngineError`].
    pub fn new(
        identity_secret: Fr,
        user_message_limit: Fr,
        path_elements: Vec<Fr>,
        identity_path_index: Vec<u8>,
    ) -> Result<Self, EngineError> {
        check_member(user_message_limit, &path_elements, &identity_path_index)?;
        // The message's inputs are not part of a partial proof; zero stands in for them.
        Ok(Self(RlnWitness {
            identity_secret: IdentitySecret::new(identity_secret),
            user_message_limit,
            message_id: Fr::from(0u8),
            path_elements,
            identity_path_index,
            x: Fr::from(0u8),
            external_nullifier: Fr::from(0u8),
        }))
    }
}

/// The prover of `zkey`'s circuit with tables fitted to `config` (none for a budget of 0).
fn prover_for(
    zkey: &Zkey,
    graph: &Arc<WitnessGraph>,
    config: &ProverConfig,
) -> Result<RlnProver, ProverError> {
    RlnCircuit::with_shared_graph(zkey, graph, config).map(RlnProver::from_circuit)
}

/// The prover tables: being built on their own thread, or built.
#[derive(Debug)]
enum Tables {
    Building(std::thread::JoinHandle<Result<RlnProver, String>>),
    Ready(Result<Arc<RlnProver>, String>),
    /// Only while a `Building` handle is being joined.
    Taken,
}

/// An RLN instance: the circuit's prover (tables built in the background, a prover without
/// tables meanwhile) and its prepared verifying key.
///
/// The tables (about a second of work per core, ~63 MiB) are built on a thread of their own
/// from the moment the instance exists: verification needs only the verifying key and is ready
/// at once; a proof asked for before the tables are done is made without them.
#[derive(Debug)]
pub struct Rln {
    tables: Mutex<Tables>,
    /// Proves while the tables are still being built: the key's bases alone (a budget of 0).
    without_tables: Arc<RlnProver>,
    verifier: RlnVerifier,
    depth: usize,
}

impl Rln {
    /// The embedded depth-20 circuit (the files v2.0.2 embeds), `ffi_rln_new`.
    ///
    /// # Errors
    /// [`EngineError::Key`] (not with the embedded files).
    pub fn new() -> Result<Self, EngineError> {
        Self::with_params(prover::rln::ARKZKEY, prover::rln::GRAPH)
    }

    /// A circuit from an arkzkey and a witness graph, `ffi_rln_new_with_params`; any depth.
    /// Both are parsed and checked against each other here; only the tables are left to the
    /// background.
    ///
    /// # Errors
    /// [`EngineError::Key`] for bytes that do not load or do not belong together.
    pub fn with_params(zkey: &[u8], graph: &[u8]) -> Result<Self, EngineError> {
        let graph = WitnessGraph::from_bytes(graph).map_err(|e| EngineError::Key(e.into()))?;
        let zkey = Zkey::from_bytes(zkey).map_err(EngineError::Key)?;
        zkey.check_graph(&graph).map_err(EngineError::Key)?;
        let verifier = RlnVerifier::new(&zkey.pk.vk).map_err(|_| EngineError::VerifyingKey)?;
        let depth = graph
            .inputs()
            .find(|(name, _)| *name == "pathElements")
            .map_or(0, |(_, len)| len);
        let defaults = ProverConfig::default();
        let config = ProverConfig {
            arithmetic: arithmetic_from_env()?,
            table_budget_bytes: table_budget_from_env()?.unwrap_or(defaults.table_budget_bytes),
        };
        let wait = wait_for_tables_from_env()?;
        // A budget too small for any table is refused now, not at the first proof.
        CircomProver::table_bytes_for(&zkey.pk, &config).map_err(EngineError::Key)?;
        let graph = Arc::new(graph);
        // Milliseconds: a copy of the key's points.
        let without_tables = Arc::new(
            prover_for(
                &zkey,
                &graph,
                &ProverConfig {
                    table_budget_bytes: 0,
                    ..config
                },
            )
            .map_err(EngineError::Key)?,
        );
        if config.table_budget_bytes == 0 {
            return Ok(Self {
                tables: Mutex::new(Tables::Ready(Ok(Arc::clone(&without_tables)))),
                without_tables,
                verifier,
                depth,
            });
        }
        let build = move || {
            // A pool of its own: proofs asked for meanwhile run on the global pool, not queued
            // behind the table build's tasks there.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(rayon::current_num_threads())
                .thread_name(|i| format!("librln-tables-{i}"))
                .build()
                .map_err(|e| format!("cannot start the table threads: {e}"))?;
            pool.install(|| prover_for(&zkey, &graph, &config))
                .map_err(|e| EngineError::Key(e).to_string())
        };
        let tables = match std::thread::Builder::new()
            .name("librln-tables".into())
            .spawn(build)
        {
            Ok(handle) => Tables::Building(handle),
            Err(e) => {
                return Err(EngineError::Tables(format!(
                    "cannot start the table thread: {e}"
                )))
            }
        };
        let rln = Self {
            tables: Mutex::new(tables),
            without_tables,
            verifier,
            depth,
        };
        if wait {
            rln.wait_for_tables()?;
        }
        Ok(rln)
    }

    /// The prover with tables once they are built, the one without them until then.
    fn prover(&self) -> Result<Arc<RlnProver>, EngineError> {
        self.tabled_prover(false)
    }

    /// The prover with tables; while they are being built, waits for them (`wait`) or returns
    /// the prover without tables.
    fn tabled_prover(&self, wait: bool) -> Result<Arc<RlnProver>, EngineError> {
        let mut tables = self
            .tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Tables::Building(handle) = &*tables {
            if !wait && !handle.is_finished() {
                return Ok(Arc::clone(&self.without_tables));
            }
            if let Tables::Building(handle) = std::mem::replace(&mut *tables, Tables::Taken) {
                let built = handle
                    .join()
                    .unwrap_or_else(|_| Err("the table thread panicked".to_owned()));
                *tables = Tables::Ready(built.map(Arc::new));
            }
        }
        match &*tables {
            Tables::Ready(Ok(prover)) => Ok(Arc::clone(prover)),
            Tables::Ready(Err(message)) => Err(EngineError::Tables(message.clone())),
            Tables::Building(_) | Tables::Taken => Err(EngineError::Tables("not built".into())),
        }
    }

    /// Blocks until the prover tables are built (a benchmark's "ready to prove").
    ///
    /// # Errors
    /// [`EngineError::Tables`] if building them failed.
    pub fn wait_for_tables(&self) -> Result<(), EngineError> {
        self.tabled_prover(true).map(drop)
    }

    /// The circuit's Merkle depth.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.depth
    }

    fn check_depth(&self, witness: &RlnWitness) -> Result<(), EngineError> {
        for (name, len) in [
            ("path_elements", witness.path_elements.len()),
            ("identity_path_index", witness.identity_path_index.len()),
        ] {
            if len != self.depth {
                return Err(EngineError::Depth(name, len, self.depth));
            }
        }
        Ok(())
    }

    /// A proof of `witness` and its values, `ffi_generate_rln_proof`.
    ///
    /// # Errors
    /// [`EngineError::Depth`], [`EngineError::Prover`].
    pub fn prove(
        &self,
        witness: &WitnessInput,
    ) -> Result<(Proof<Bn254>, PublicValues), EngineError> {
        self.check_depth(&witness.0)?;
        self.prover()?
            .prove(&witness.0, &mut rand::thread_rng())
            .map_err(EngineError::Prover)
    }

    /// The member's share of its proofs, in zerokit's form, `ffi_generate_partial_zk_proof`.
    ///
    /// # Errors
    /// [`EngineError::Depth`], [`EngineError::Prover`].
    pub fn partial(&self, witness: &PartialWitnessInput) -> Result<PartialParts, EngineError> {
        self.check_depth(&witness.0)?;
        let prover = self.prover()?;
        let partial = prover.partial(&witness.0).map_err(EngineError::Prover)?;
        prover.partial_parts(&partial).map_err(EngineError::Prover)
    }

    /// A proof of `witness` from a partial proof, `ffi_finish_rln_proof`.
    ///
    /// # Errors
    /// [`EngineError::Depth`], [`EngineError::Prover`] (a mask of another circuit).
    pub fn finish(
        &self,
        parts: &PartialParts,
        witness: &WitnessInput,
    ) -> Result<(Proof<Bn254>, PublicValues), EngineError> {
        self.check_depth(&witness.0)?;
        let prover = self.prover()?;
        let partial = prover
            .partial_from_parts(parts)
            .map_err(EngineError::Prover)?;
        prover
            .finish(&partial, &witness.0, &mut rand::thread_rng())
            .map_err(EngineError::Prover)
    }

    /// `ffi_verify_with_roots`, in zerokit's order: the pairing check, then the root (skipped
    /// for an empty list), then `x`.
    ///
    /// # Errors
    /// [`EngineError::InvalidProof`], [`EngineError::InvalidRoot`],
    /// [`EngineError::InvalidSignal`].
    pub fn verify_with_roots(
        &self,
        proof: &Proof<Bn254>,
        values: &PublicValues,
        roots: &[Fr],
        x: &Fr,
    ) -> Result<(), EngineError> {
        if !self.verifier.verify_inputs(proof, &values.as_inputs()) {
            return Err(EngineError::InvalidProof);
        }
        if !roots.is_empty() && !roots.contains(&values.root) {
            return Err(EngineError::InvalidRoot);
        }
        if values.x != *x {
            return Err(EngineError::InvalidSignal);
        }
        Ok(())
    }
}

/// The environment variable that picks the prover's arithmetic: `auto` (the default: IFMA lanes
/// where the CPU has them), `portable` or `ifma`. A C caller has no other knob; it is what measures
/// the portable path, the one a CPU without IFMA runs, on a CPU with it.
pub const ARITHMETIC_VAR: &str = "LIBRLN_ARITHMETIC";

fn arithmetic_from_env() -> Result<Arithmetic, EngineError> {
    let chosen = match std::env::var(ARITHMETIC_VAR) {
        Err(std::env::VarError::NotPresent) => Arithmetic::Auto,
        Ok(value) => match value.as_str() {
            "" | "auto" => Arithmetic::Auto,
            "portable" => Arithmetic::Portable,
            "ifma" => Arithmetic::Ifma,
            other => return Err(EngineError::Arithmetic(other.to_owned())),
        },
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(EngineError::Arithmetic("(not UTF-8)".into()))
        }
    };
    if chosen == Arithmetic::Ifma && !prover::lanes::ifma_available() {
        return Err(EngineError::Arithmetic(
            "ifma, on a CPU without AVX-512 IFMA".into(),
        ));
    }
    Ok(chosen)
}

/// The environment variable that caps the prover's fixed-base tables, in MiB (default: the
/// prover's [`ProverConfig::default`] budget). A smaller budget keeps fewer window shifts per
/// base: less memory, slower proofs (docs/librln.md measures each budget).
pub const TABLE_BUDGET_VAR: &str = "LIBRLN_TABLE_BUDGET_MIB";

fn table_budget_from_env() -> Result<Option<usize>, EngineError> {
    match std::env::var(TABLE_BUDGET_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(value) if value.is_empty() => Ok(None),
        Ok(value) => value
            .parse::<usize>()
            .ok()
            .and_then(|mib| mib.checked_mul(1 << 20))
            .map(Some)
            .ok_or(EngineError::TableBudget(value)),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(EngineError::TableBudget("(not UTF-8)".into()))
        }
    }
}

/// The environment variable that makes `ffi_rln_new` return only once the prover tables are
/// built (`1`; default `0`: they build in the background while proofs are made without them):
/// every proof at full speed, for a slower start.
pub const WAIT_FOR_TABLES_VAR: &str = "LIBRLN_WAIT_FOR_TABLES";

fn wait_for_tables_from_env() -> Result<bool, EngineError> {
    match std::env::var(WAIT_FOR_TABLES_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(false),
        Ok(value) => match value.as_str() {
            "" | "0" => Ok(false),
            "1" => Ok(true),
            other => Err(EngineError::WaitForTables(other.to_owned())),
        },
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(EngineError::WaitForTables("(not UTF-8)".into()))
        }
    }
}

/// The secret on the line through two shares, `ffi_compute_id_secret` (zerokit's
/// `compute_id_secret`: the shares' other checks are the caller's).
///
/// # Errors
/// [`EngineError::DivisionByZero`] for two shares with the same `x`.
pub fn compute_id_secret(share1: (Fr, Fr), share2: (Fr, Fr)) -> Result<Fr, EngineError> {
    rln_glue::primitives::secret_on_line(share1, share2)
        .map(|secret| secret.expose())
        .map_err(|_| EngineError::DivisionByZero)
}

/// zerokit's `extended_keygen` from `rng`: trapdoor, nullifier, secret = Poseidon(trapdoor,
/// nullifier), commitment = Poseidon(secret).
pub fn extended_keygen<R: rand::RngCore>(rng: &mut R) -> [Fr; 4] {
    let trapdoor = Fr::rand(rng);
    let nullifier = Fr::rand(rng);
    let keys = rln_glue::primitives::ExtendedIdentityKeys::from_parts(
        IdentitySecret::new(trapdoor),
        IdentitySecret::new(nullifier),
    );
    let secret = keys.keys().secret().expose();
    [trapdoor, nullifier, secret, keys.keys().id_commitment()]
}

/// zerokit's `extended_seeded_keygen`: [`extended_keygen`] from ChaCha20 seeded with the
/// Keccak-256 of `seed`.
#[must_use]
pub fn extended_seeded_keygen(seed: &[u8]) -> [Fr; 4] {
    use rand::SeedableRng;
    let digest = rln_glue::primitives::keccak256(seed);
    extended_keygen(&mut rand_chacha::ChaCha20Rng::from_seed(digest))
}

impl Drop for Rln {
    /// Waits for a table thread still running, so that freeing an instance frees everything.
    fn drop(&mut self) {
        let tables = self
            .tables
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Tables::Building(handle) = std::mem::replace(tables, Tables::Taken) {
            let _ = handle.join();
        }
    }
}
