//! Model-based property tests: every tree against the naive reference, after every operation.

use hasher::PoseidonHasher;
use integration_tests::{cases, fr_leaf};
use proptest::prelude::*;
use tree_core::testing::{arb_ops, check_ops, mix_leaf, MixHasher};
use tree_core::{Depth, FullMerkleTree, OptimalMerkleTree, RehashConfig};

fn config(parallel: bool) -> RehashConfig {
    RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX })
}

/// Instantiates the same model suite for one tree constructor.
macro_rules! tree_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(cases(128)))]

                #[test]
                fn mix_hasher_matches_reference(
                    parallel in any::<bool>(),
                    (depth, ops) in (1u8..=6).prop_flat_map(|d| (Just(d), arb_ops(d, 40, mix_leaf))),
                ) {
                    let _case = integration_tests::tally!("mix_hasher_matches_reference", ops.len());
                    let make = $make;
                    check_ops(make(Depth::new(depth).unwrap(), config(parallel)), &ops, |t| t);
                }
            }
        }
    };
}

tree_suite!(optimal, |d, c| OptimalMerkleTree::<MixHasher>::with_config(
    d, c
));
tree_suite!(full, |d, c| FullMerkleTree::<MixHasher>::with_config(d, c)
    .unwrap());

mod poseidon_trees {
    use super::*;
    use tree_core::MerkleTree;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases(12)))]
        #[test]
        fn optimal(parallel in any::<bool>(), ops in arb_ops(4, 16, fr_leaf)) {
            let _case = integration_tests::tally!("optimal", ops.len());
            let tree = OptimalMerkleTree::<PoseidonHasher>::with_config(Depth::new(4).unwrap(), config(parallel));
            let tree = check_ops(tree, &ops, |t| t);
            prop_assert_eq!(tree.depth().get(), 4);
        }

        #[test]
        fn full(parallel in any::<bool>(), ops in arb_ops(4, 16, fr_leaf)) {
            let _case = integration_tests::tally!("full", ops.len());
            let tree = FullMerkleTree::<PoseidonHasher>::with_config(Depth::new(4).unwrap(), config(parallel)).unwrap();
            check_ops(tree, &ops, |t| t);
        }
    }
}

/// The parallel and sequential rehash paths give identical nodes on large scattered batches.
#[test]
fn parallel_and_sequential_rehash_agree() {
    use tree_core::{MerkleTree, MerkleTreeExt, UpdateBatch};
    let depth = Depth::new(12).unwrap();
    let mut seq = OptimalMerkleTree::<MixHasher>::with_config(depth, config(false));
    let mut par = OptimalMerkleTree::<MixHasher>::with_config(depth, config(true));
    let mut full_par = FullMerkleTree::<MixHasher>::with_config(depth, config(true)).unwrap();
    for round in 0..20u64 {
        let mut batch = UpdateBatch::<MixHasher>::new();
        batch.set_range(round * 97 + 1, (0..300).map(|i| i * 31 + round));
        for i in 0..50 {
            batch.set((i * 181 + round * 7) % 4096, i + 1);
        }
        if round > 0 {
            batch.delete(round * 3);
        }
        seq.apply(batch.clone()).unwrap();
        par.apply(batch.clone()).unwrap();
        full_par.apply(batch).unwrap();
        assert_eq!(seq.root(), par.root());
        assert_eq!(seq.root(), full_par.root());
    }
    for i in (0..4096).step_by(37) {
        assert_eq!(seq.proof(i).unwrap(), par.proof(i).unwrap());
    }
    par.set_min_parallel_nodes(usize::MAX);
    assert_eq!(par.rehash_config().min_parallel_nodes, usize::MAX);
}

mod fast_poseidon {
    use super::*;
    use hasher::LightPoseidonHasher;
    use tree_core::testing::Op;
    use tree_core::{MerkleTree, MerkleTreeExt};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases(16).min(64)))]

        /// Trees hashed with the default Poseidon (FastPoseidon, batched levels) have exactly
        /// the roots of trees hashed with light-poseidon, after every operation.
        #[test]
        fn same_roots_as_light_poseidon(ops in arb_ops(5, 20, fr_leaf)) {
            let _case = integration_tests::tally!("same_roots_as_light_poseidon", ops.len());
            let depth = Depth::new(5).unwrap();
            let mut light = OptimalMerkleTree::<LightPoseidonHasher>::new(depth);
            let mut fast = FullMerkleTree::<PoseidonHasher>::new(depth).unwrap();
            for op in &ops {
                let (a, b) = match op.clone() {
                    Op::Set(i, l) => (light.set(i, l), fast.set(i, l)),
                    Op::SetRange(s, ls) => (light.set_range(s, ls.clone()), fast.set_range(s, ls)),
                    Op::Delete(i) => (light.delete(i), fast.delete(i)),
                    Op::UpdateNext(l) => (light.update_next(l), fast.update_next(l)),
                    Op::Override(s, ls, rs) => (
                        light.override_range(s, ls.clone(), rs.clone()),
                        fast.override_range(s, ls, rs),
                    ),
                    Op::SetMetadata(_) | Op::Restart => continue,
                };
                prop_assert_eq!(a, b);
                prop_assert_eq!(light.root(), fast.root());
            }
        }
    }
}
