//! rln 3.0.0's shipped depth-20 circuit (single message id): its witness graph and proving key,
//! prepared once per process for [`CircomProver`].

use std::sync::Arc;

use crate::{CircomProver, ProverConfig, ProverError, WitnessGraph};

/// rln 3.0.0's `resources/tree_depth_20/graph.bin`, embedded by the build script.
const GRAPH: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rln_graph.bin"));

/// The circuit's witness graph and the prover tables of its proving key.
#[derive(Debug, Clone)]
pub struct RlnCircuit {
    /// Computes the full assignment from the circuit's named inputs.
    pub graph: Arc<WitnessGraph>,
    /// Proves from a full assignment.
    pub prover: Arc<CircomProver>,
}

impl RlnCircuit {
    /// Parses the graph and builds the tables with [`ProverConfig::default`] (about a second on
    /// two cores; ~63 MiB).
    ///
    /// # Errors
    /// A malformed graph or proving key (neither happens with rln's shipped files; the checks
    /// are the same as for any key).
    pub fn load() -> Result<Self, ProverError> {
        Self::load_with(&ProverConfig::default())
    }

    /// [`load`](Self::load) with the tables fitted to `config`.
    ///
    /// # Errors
    /// As [`load`](Self::load); [`ProverError::TableBudget`] for a budget too small.
    pub fn load_with(config: &ProverConfig) -> Result<Self, ProverError> {
        let graph = WitnessGraph::from_bytes(GRAPH)?;
        let (pk, matrices) = &**rln::circuit::default_zkey_single();
        let prover = CircomProver::with_config(
            pk,
            &matrices.a,
            &matrices.b,
            matrices.num_instance_variables,
            config,
        )?;
        if graph.wires() != prover.wires() {
            return Err(ProverError::KeyShape(format!(
                "the graph computes {} wires, the key has {}",
                graph.wires(),
                prover.wires()
            )));
        }
        Ok(Self {
            graph: Arc::new(graph),
            prover: Arc::new(prover),
        })
    }
}
