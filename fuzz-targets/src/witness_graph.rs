//! Witness graphs (`prover::WitnessGraph`, iden3's `graph.bin` format): hostile files are
//! parsed and, when accepted, evaluated with every input given and with none.
//!
//! Invariants: parsing and evaluation never panic and never allocate beyond what the file's size
//! justifies; an accepted graph's full witness has one value per wire and agrees with the
//! partial evaluation given the same inputs.

use ark_bn254::Fr;
use prost::Message;
use prover::witness::proto::{self, Kind};
use prover::WitnessGraph;

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(graph) = WitnessGraph::from_bytes(data) else {
        return;
    };
    let values: Vec<(String, Vec<Fr>)> = graph
        .inputs()
        .map(|(name, len)| {
            (
                name.to_owned(),
                (0..len as u64).map(|k| Fr::from(k + 3)).collect(),
            )
        })
        .collect();
    let none = graph.partial_witness::<&str, &[Fr]>(&[]);
    assert!(
        none.is_ok_and(|w| w.len() == graph.wires()),
        "no inputs: one value per wire"
    );
    let partial = graph.partial_witness(&values);
    if let Ok(full) = graph.witness(&values) {
        assert_eq!(full.len(), graph.wires());
        let partial = partial.unwrap_or_default();
        assert!(
            full.iter().zip(&partial).all(|(f, p)| Some(*f) == *p),
            "partial evaluation with every input differs from the full witness"
        );
    }
}

fn node(kind: Kind) -> proto::Node {
    proto::Node { node: Some(kind) }
}

fn duo(op: i32, a: u32, b: u32) -> proto::Node {
    node(Kind::DuoOp(proto::DuoOpNode {
        op,
        a_idx: a,
        b_idx: b,
    }))
}

/// Small valid graphs using every operation: two inputs `a` (2 values) and `b`.
#[must_use]
pub fn seeds() -> Vec<Vec<u8>> {
    (0..20)
        .map(|op| {
            let nodes = vec![
                node(Kind::Input(proto::InputNode { idx: 0 })),
                node(Kind::Input(proto::InputNode { idx: 1 })),
                node(Kind::Input(proto::InputNode { idx: 2 })),
                node(Kind::Input(proto::InputNode { idx: 3 })),
                node(Kind::Constant(proto::ConstantNode {
                    value: Some(proto::BigUInt {
                        value_le: vec![5, 1],
                    }),
                })),
                duo(op, 1, 3),
                duo((op + 7) % 20, 5, 4),
                node(Kind::UnoOp(proto::UnoOpNode {
                    op: i32::from(op % 2 == 0),
                    a_idx: 6,
                })),
                node(Kind::TresOp(proto::TresOpNode {
                    op: 0,
                    a_idx: 2,
                    b_idx: 7,
                    c_idx: 5,
                })),
            ];
            let metadata = proto::GraphMetadata {
                witness_signals: vec![0, 3, 8, 6, 1],
                inputs: [
                    (
                        "a".to_owned(),
                        proto::SignalDescription { offset: 1, len: 2 },
                    ),
                    (
                        "b".to_owned(),
                        proto::SignalDescription { offset: 3, len: 1 },
                    ),
                ]
                .into_iter()
                .collect(),
            };
            let mut file = prover::witness::GRAPH_MAGIC.to_vec();
            file.extend((nodes.len() as u64).to_le_bytes());
            for n in &nodes {
                file.extend(n.encode_length_delimited_to_vec());
            }
            file.extend(metadata.encode_length_delimited_to_vec());
            file
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_a_graph_that_evaluates() {
        for seed in seeds() {
            let graph = WitnessGraph::from_bytes(&seed).unwrap();
            assert_eq!(graph.wires(), 5);
            let a = [Fr::from(2u8), Fr::from(9u8)];
            let b = [Fr::from(4u8)];
            let z = graph.witness(&[("a", &a[..]), ("b", &b[..])]).unwrap();
            assert_eq!((z[0], z[1]), (Fr::from(1u8), Fr::from(4u8)));
            run(&seed);
        }
    }
}
