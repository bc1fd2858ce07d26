//! Bad input: every rule violation is a typed error with its values, and changes nothing.

use hasher::Keccak256Hasher as K;
use tree_core::{
    Depth, FullMerkleTree, MerkleProof, MerkleTree, MerkleTreeExt, NodeAddr, OptimalMerkleTree,
    TreeError,
};

fn trees() -> Vec<Box<dyn Fn() -> Box<dyn Check>>> {
    vec![
        Box::new(|| Box::new(OptimalMerkleTree::<K>::new(Depth::new(3).unwrap()))),
        Box::new(|| Box::new(FullMerkleTree::<K>::new(Depth::new(3).unwrap()).unwrap())),
    ]
}

/// Object-safe view of a tree for table tests.
trait Check {
    fn run(&mut self);
}

impl<T: MerkleTree<Hasher = K, Error = TreeError>> Check for T {
    fn run(&mut self) {
        let leaf = [1u8; 32];
        self.set_range(0, [leaf; 4]).unwrap();
        let root = self.root();
        let cases: Vec<(Result<(), TreeError>, TreeError)> = vec![
            (
                self.set(8, leaf),
                TreeError::IndexOutOfBounds {
                    index: 8,
                    capacity: 8,
                },
            ),
            (
                self.set(u64::MAX, leaf),
                TreeError::IndexOutOfBounds {
                    index: u64::MAX,
                    capacity: 8,
                },
            ),
            (
                self.set_range(7, [leaf; 2]),
                TreeError::RangeOutOfBounds {
                    start: 7,
                    end: 9,
                    capacity: 8,
                },
            ),
            (
                self.set_range(u64::MAX, [leaf; 2]),
                TreeError::RangeOverflow {
                    start: u64::MAX,
                    len: 2,
                },
            ),
            (
                self.set_range(9, []),
                TreeError::RangeOutOfBounds {
                    start: 9,
                    end: 9,
                    capacity: 8,
                },
            ),
            (
                self.delete(4),
                TreeError::DeleteUnset {
                    index: 4,
                    next_index: 4,
                },
            ),
            (
                self.delete(8),
                TreeError::IndexOutOfBounds {
                    index: 8,
                    capacity: 8,
                },
            ),
            (self.override_range(0, [], []), TreeError::EmptyOverride),
            (
                self.override_range(6, [leaf; 3], []),
                TreeError::RangeOutOfBounds {
                    start: 6,
                    end: 9,
                    capacity: 8,
                },
            ),
            (
                self.override_range(0, [leaf], [5]),
                TreeError::DeleteUnset {
                    index: 5,
                    next_index: 4,
                },
            ),
            (
                self.override_range(0, [leaf], [9]),
                TreeError::IndexOutOfBounds {
                    index: 9,
                    capacity: 8,
                },
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want.clone()));
            assert_eq!(self.root(), root, "{want:?} changed the tree");
            assert_eq!(self.next_index(), 4);
        }
        self.set_range(4, [leaf; 4]).unwrap();
        assert_eq!(
            self.update_next(leaf),
            Err(TreeError::TreeFull { capacity: 8 })
        );
        assert_eq!(
            self.get(8),
            Err(TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8
            })
        );
        assert_eq!(
            self.proof(8).map(|_| ()),
            Err(TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8
            })
        );
        assert_eq!(
            self.node(NodeAddr { level: 4, index: 0 }),
            Err(TreeError::LevelOutOfBounds { level: 4, depth: 3 })
        );
        assert_eq!(
            self.node(NodeAddr { level: 1, index: 4 }),
            Err(TreeError::NodeOutOfBounds {
                level: 1,
                index: 4,
                width: 4
            })
        );
        assert_eq!(
            self.subtree_root(4, 0),
            Err(TreeError::LevelOutOfBounds { level: 4, depth: 3 })
        );
        // Proofs: wrong length and contradicting index are invalid, never an error or a panic.
        let proof = self.proof(2).unwrap();
        assert!(self.verify_proof(&proof, &leaf));
        let short = MerkleProof::<K>::new(2, proof.path_elements()[..2].to_vec());
        assert!(!self.verify_proof(&short, &leaf));
        let bad_index = MerkleProof::<K>::new(2 + 8, proof.path_elements().to_vec());
        assert!(!bad_index.verify(&self.root(), &leaf));
    }
}

#[test]
fn every_rule_violation_is_typed_and_changes_nothing() {
    for make in trees() {
        make().run();
    }
}

#[test]
fn depths_out_of_range_are_typed_errors() {
    assert_eq!(
        Depth::new(0),
        Err(TreeError::InvalidDepth { depth: 0, max: 63 })
    );
    assert_eq!(
        Depth::new(64),
        Err(TreeError::InvalidDepth { depth: 64, max: 63 })
    );
    // The sparse tree serves every valid depth; the dense one refuses what it cannot allocate.
    let deep = OptimalMerkleTree::<K>::new(Depth::new(63).unwrap());
    assert_eq!(deep.capacity(), 1 << 63);
    assert!(matches!(
        FullMerkleTree::<K>::new(Depth::new(50).unwrap()),
        Err(TreeError::AllocationFailed { depth: 50, .. })
    ));
}
