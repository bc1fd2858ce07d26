//! Poseidon2 over the BN254 scalar field (Grassi, Khovratovich, Schofnegger,
//! [eprint 2023/323](https://eprint.iacr.org/2023/323)), in the HorizenLabs instance every
//! implementation of the field agrees on: x⁵ S-box, 8 external and 56 internal rounds for
//! t = 2, 3 and 4, the paper's external matrices (`circ(2, 1)`, `circ(2, 1, 1)`, `M4`) and its
//! internal ones (`[[2, 1], [1, 3]]`, `[[2, 1, 1], [1, 2, 1], [1, 1, 3]]`, and for t = 4 the
//! instance's diagonal).
//!
//! The round constants are drawn here from the Grain LFSR seeded with the instance's shape, as
//! the reference parameter script draws them (`grain`), so nothing but the t = 4 diagonal — which
//! the script sampled, and which is therefore data — is written down. Tests compare the
//! permutations with two implementations no one here wrote: `zkhash` (HorizenLabs' reference
//! crate, t = 3) and `taceo-poseidon2` (t = 2, 3, 4).
//!
//! Two ways to hash a tree's pair, as the field uses them, each its own [`Hasher`]:
//! - [`Poseidon2Hasher`]: the paper's compression (§3.1) on t = 2, `P([l, r])[0] + l`, the
//!   compression of World ID 4.0's trees;
//! - [`Poseidon2T3Hasher`]: `zkhash`'s Merkle compression on t = 3, `P([l, r, 0])[0]`.
//!
//! Whole levels run eight permutations at once on IFMA lanes (`field-lanes`) where the CPU has
//! them and [`poseidon_arithmetic`](crate::poseidon_arithmetic) allows it; ark-ff otherwise.

mod grain;

use std::sync::OnceLock;

use ark_ff::{AdditiveGroup, Field, MontFp, Zero};
use field_lanes::{Poseidon2Lanes, Poseidon2Rounds};

use crate::fast::{count_lane_permutations, in_blocks, lanes_selected, LANE_MIN_BATCH};
use crate::poseidon::{fr_from_le_bytes, fr_to_le_bytes, Fr};
use crate::{DecodeError, DigestCodec, Hasher};
use grain::{Grain, Instance};

/// External (full) rounds of every BN254 Poseidon2 instance here.
pub const POSEIDON2_EXTERNAL_ROUNDS: usize = 8;
/// Internal (partial) rounds of every BN254 Poseidon2 instance here.
pub const POSEIDON2_INTERNAL_ROUNDS: usize = 56;

/// Bits of the BN254 scalar field's modulus.
const FIELD_BITS: u64 = 254;

/// The t = 4 internal matrix's diagonal minus one, as the HorizenLabs parameter script sampled it
/// for BN254 (the instance's data; `taceo-poseidon2`'s t = 4 agrees, tested).
const DIAGONAL_4: [Fr; 4] = [
    MontFp!("7626475329478847982857743246276194948757851985510858890691733676098590062311"),
    MontFp!("5498568565063849786384470689962419967523752476452646391422913716315471115275"),
    MontFp!("148936322117705719734052984176402258788283488576388928671173547788498414613"),
    MontFp!("15456385653678559339152734484033356164266089951521103188900320352052358038155"),
];

/// The Poseidon2 permutation of width `T` (2, 3 or 4) over BN254's `Fr`.
#[derive(Debug, Clone)]
pub struct Poseidon2<const T: usize> {
    first: Vec<[Fr; T]>,
    internal: Vec<Fr>,
    last: Vec<[Fr; T]>,
    diagonal: [Fr; T],
    lanes: Option<Poseidon2Lanes<Fr, T>>,
}

impl<const T: usize> Poseidon2<T> {
    /// The HorizenLabs instance of width `T`; `None` for a width other than 2, 3, 4.
    #[must_use]
    pub fn new() -> Option<Self> {
        let diagonal: [Fr; T] = match T {
            2 => core::array::from_fn(|i| Fr::from(1 + i as u64)),
            3 => core::array::from_fn(|i| Fr::from(if i == 2 { 2u64 } else { 1 })),
            4 => core::array::from_fn(|i| DIAGONAL_4[i]),
            _ => return None,
        };
        let mut grain = Grain::new(Instance {
            field: 1,
            sbox: 0,
            field_bits: FIELD_BITS,
            width: T as u64,
            full_rounds: POSEIDON2_EXTERNAL_ROUNDS as u64,
            partial_rounds: POSEIDON2_INTERNAL_ROUNDS as u64,
        });
        // The script draws `t` constants for an external round and one for an internal round,
        // in the order the rounds run.
        let half = POSEIDON2_EXTERNAL_ROUNDS / 2;
        let external = |grain: &mut Grain| -> Vec<[Fr; T]> {
            (0..half)
                .map(|_| core::array::from_fn(|_| grain.next_field(FIELD_BITS)))
                .collect()
        };
        let first = external(&mut grain);
        let internal: Vec<Fr> = (0..POSEIDON2_INTERNAL_ROUNDS)
            .map(|_| grain.next_field(FIELD_BITS))
            .collect();
        let last = external(&mut grain);
        let lanes = Poseidon2Lanes::new(Poseidon2Rounds {
            first: &first,
            internal: &internal,
            last: &last,
            diagonal: &diagonal,
        })
        .ok();
        Some(Self {
            first,
            internal,
            last,
            diagonal,
            lanes,
        })
    }

    fn sbox(x: &mut Fr) {
        let square = x.square();
        *x *= square.square();
    }

    /// The external matrix: `circ(2, 1)`, `circ(2, 1, 1)` or the paper's `M4`.
    fn external(state: &mut [Fr; T]) {
        match T {
            2 | 3 => {
                let sum: Fr = state.iter().sum();
                state.iter_mut().for_each(|x| *x += sum);
            }
            4 => {
                let t0 = state[0] + state[1];
                let t1 = state[2] + state[3];
                let t2 = state[1].double() + t1;
                let t3 = state[3].double() + t0;
                let t4 = t1.double().double() + t3;
                let t5 = t0.double().double() + t2;
                state[0] = t3 + t5;
                state[1] = t5;
                state[2] = t2 + t4;
                state[3] = t4;
            }
            _ => unreachable!("Poseidon2::new builds widths 2, 3, 4 only"),
        }
    }

    /// The internal matrix `J + diag(diagonal)`.
    fn internal(&self, state: &mut [Fr; T]) {
        let sum: Fr = state.iter().sum();
        match T {
            2 | 3 => {
                state[..T - 1].iter_mut().for_each(|x| *x += sum);
                state[T - 1].double_in_place();
                state[T - 1] += sum;
            }
            _ => {
                for (x, d) in state.iter_mut().zip(&self.diagonal) {
                    *x *= d;
                    *x += sum;
                }
            }
        }
    }

    fn external_round(state: &mut [Fr; T], constants: &[Fr; T]) {
        for (x, c) in state.iter_mut().zip(constants) {
            *x += c;
            Self::sbox(x);
        }
        Self::external(state);
    }

    /// The permutation, in place, on ark-ff.
    pub fn permute(&self, state: &mut [Fr; T]) {
        Self::external(state);
        for constants in &self.first {
            Self::external_round(state, constants);
        }
        for constant in &self.internal {
            state[0] += constant;
            Self::sbox(&mut state[0]);
            self.internal(state);
        }
        for constants in &self.last {
            Self::external_round(state, constants);
        }
    }

    /// `out[i] = permutation(states[i])[0]` for `i < min(states.len(), out.len())`: eight at a
    /// time on IFMA lanes when [`poseidon_arithmetic`](crate::poseidon_arithmetic) allows it,
    /// this CPU has them and there are at least [`LANE_MIN_BATCH`] states; one by one on ark-ff
    /// otherwise.
    pub fn permute_first_many(&self, states: &[[Fr; T]], out: &mut [Fr]) {
        let n = states.len().min(out.len());
        if n >= LANE_MIN_BATCH && lanes_selected() {
            if let Some(lanes) = &self.lanes {
                if lanes.permute_first(&states[..n], &mut out[..n]) {
                    count_lane_permutations(n);
                    return;
                }
            }
        }
        self.permute_first_scalar(&states[..n], &mut out[..n]);
    }

    /// [`permute_first_many`](Self::permute_first_many) on ark-ff whatever the CPU.
    pub fn permute_first_scalar(&self, states: &[[Fr; T]], out: &mut [Fr]) {
        for (o, state) in out.iter_mut().zip(states) {
            let mut state = *state;
            self.permute(&mut state);
            *o = state[0];
        }
    }
}

static WIDTH_2: OnceLock<Option<Poseidon2<2>>> = OnceLock::new();
static WIDTH_3: OnceLock<Option<Poseidon2<3>>> = OnceLock::new();
static WIDTH_4: OnceLock<Option<Poseidon2<4>>> = OnceLock::new();

fn instance<const T: usize>(
    cell: &'static OnceLock<Option<Poseidon2<T>>>,
) -> &'static Poseidon2<T> {
    match cell.get_or_init(Poseidon2::new) {
        Some(p) => p,
        None => unreachable!("widths 2, 3 and 4 always build (tested)"),
    }
}

/// The t = 2 permutation (built once per process, on first use).
#[must_use]
pub fn poseidon2_t2() -> &'static Poseidon2<2> {
    instance(&WIDTH_2)
}

/// The t = 3 permutation (built once per process, on first use).
#[must_use]
pub fn poseidon2_t3() -> &'static Poseidon2<3> {
    instance(&WIDTH_3)
}

/// The t = 4 permutation (built once per process, on first use).
#[must_use]
pub fn poseidon2_t4() -> &'static Poseidon2<4> {
    instance(&WIDTH_4)
}

/// The hasher ID of [`Poseidon2Hasher`] trees.
const T2_ID: &str = "poseidon2-bn254-t2-compress";
/// The hasher ID of [`Poseidon2T3Hasher`] trees.
const T3_ID: &str = "poseidon2-bn254-t3-zkhash";

/// Poseidon2 as a tree hasher, the paper's t = 2 compression: `hash_pair(l, r) = P([l, r])[0] +
/// l` (World ID 4.0's trees), empty leaf 0, whole levels eight at a time on IFMA lanes where
/// present. Nodes encode as 32 bytes little-endian, non-canonical bytes refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Poseidon2Hasher;

impl Hasher for Poseidon2Hasher {
    type Digest = Fr;
    const ID: &'static str = T2_ID;
    const BATCH: usize = 8;

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        let mut state = [*left, *right];
        poseidon2_t2().permute(&mut state);
        state[0] + left
    }

    fn hash_level(children: &[Fr], parents: &mut [Fr]) {
        let n = parents.len().min(children.len() / 2);
        in_blocks(
            &mut parents[..n],
            |i| (children[2 * i], children[2 * i + 1]),
            |l, r| [l, r],
            |states, block| {
                poseidon2_t2().permute_first_many(states, block);
                // The feed-forward: word 0 of each state is its left child.
                for (parent, state) in block.iter_mut().zip(states) {
                    *parent += state[0];
                }
            },
        );
    }
}

/// Poseidon2 as a tree hasher, `zkhash`'s Merkle compression on t = 3: `hash_pair(l, r) =
/// P([l, r, 0])[0]`, empty leaf 0, whole levels eight at a time on IFMA lanes where present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Poseidon2T3Hasher;

impl Hasher for Poseidon2T3Hasher {
    type Digest = Fr;
    const ID: &'static str = T3_ID;
    const BATCH: usize = 8;

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        let mut state = [*left, *right, Fr::zero()];
        poseidon2_t3().permute(&mut state);
        state[0]
    }

    fn hash_level(children: &[Fr], parents: &mut [Fr]) {
        let n = parents.len().min(children.len() / 2);
        in_blocks(
            &mut parents[..n],
            |i| (children[2 * i], children[2 * i + 1]),
            |l, r| [l, r, Fr::zero()],
            |states, block| poseidon2_t3().permute_first_many(states, block),
        );
    }
}

macro_rules! fr_codec {
    ($hasher:ty) => {
        impl DigestCodec for $hasher {
            const LEN: usize = 32;

            fn encode(digest: &Fr, out: &mut [u8]) {
                out[..32].copy_from_slice(&fr_to_le_bytes(digest));
            }

            fn decode(bytes: &[u8]) -> Result<Fr, DecodeError> {
                fr_from_le_bytes(bytes)
            }
        }
    };
}

fr_codec!(Poseidon2Hasher);
fr_codec!(Poseidon2T3Hasher);

#[cfg(test)]
mod tests;
