//! Batched Poseidon2 on hostile batches: the IFMA lanes where the CPU has them against the
//! scalar path, for the three widths and both tree compressions.
//!
//! The bytes choose a batch length (0..=40: empty batches, tails of every length, several groups
//! of eight) and the inputs, each a field-edge value or 32 bytes reduced into the field (the
//! same shapes as `poseidon_lanes`).
//!
//! Invariants: `permute_first_many` (lanes) equals `permute_first_scalar` for t = 2, 3, 4, and
//! `hash_level` equals `hash_pair` for every pair of `Poseidon2Hasher` and `Poseidon2T3Hasher`.

use hasher::{
    poseidon2_t2, poseidon2_t3, poseidon2_t4, Fr, Hasher, Poseidon2, Poseidon2Hasher,
    Poseidon2T3Hasher,
};

use crate::poseidon_lanes::element;

fn check<const T: usize>(p: &Poseidon2<T>, words: &[Fr]) {
    let states: Vec<[Fr; T]> = words
        .chunks_exact(T)
        .map(|c| core::array::from_fn(|i| c[i]))
        .collect();
    let mut lanes = vec![Fr::from(0u64); states.len()];
    let mut scalar = lanes.clone();
    p.permute_first_many(&states, &mut lanes);
    p.permute_first_scalar(&states, &mut scalar);
    assert_eq!(
        lanes,
        scalar,
        "t = {T}: lanes and scalar disagree on {} states",
        states.len()
    );
}

fn level<H: Hasher<Digest = Fr>>(children: &[Fr]) {
    let mut parents = vec![Fr::from(0u64); children.len() / 2];
    H::hash_level(children, &mut parents);
    for (i, parent) in parents.iter().enumerate() {
        let want = H::hash_pair(&children[2 * i], &children[2 * i + 1]);
        assert_eq!(
            *parent,
            want,
            "{}: hash_level and hash_pair disagree at {i}",
            H::ID
        );
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(len % 41);
    let mut chunks = rest.chunks(33);
    let words: Vec<Fr> = (0..4 * n)
        .map(|_| element(chunks.next().unwrap_or(&[])))
        .collect();
    check(poseidon2_t2(), &words[..2 * n]);
    check(poseidon2_t3(), &words[..3 * n]);
    check(poseidon2_t4(), &words);
    level::<Poseidon2Hasher>(&words[..2 * n]);
    level::<Poseidon2T3Hasher>(&words[..2 * n]);
}

/// A full group plus a tail, with every edge shape.
pub fn seeds() -> Vec<Vec<u8>> {
    crate::poseidon_lanes::seeds()
}
