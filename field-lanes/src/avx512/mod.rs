//! The IFMA lanes: BN254 field arithmetic on eight elements at once (`vpmadd52luq` /
//! `vpmadd52huq`), generic over the field ([`PrimeLanes`](crate::PrimeLanes): `Fq` or `Fr`),
//! and the kernels that run on it. One room each:
//!
//! - `fp`: eight elements of a prime field (`Fp8`) and their Montgomery arithmetic;
//! - `lanes`: the operations a kernel runs over any lane field (`Fp8`, and `Fq2x8` on top of it);
//! - `pairs`: the batch-affine pair addition of the prover's bucket sums (`Fq`, `Fq2`);
//! - `poseidon`: the Poseidon permutation (`Fr`), over the lane form of its rounds
//!   ([`LaneRounds`](crate::lane_rounds::LaneRounds));
//! - `poseidon2`: the Poseidon2 permutation (`Fr`, t = 2, 3, 4), over the lane form of its
//!   rounds ([`Poseidon2LaneRounds`](crate::lane_rounds::Poseidon2LaneRounds)).
//!
//! The arithmetic knows nothing of the kernels. This directory is the only place in the
//! workspace allowed `unsafe`: every intrinsic needs AVX-512F and AVX-512 IFMA, which
//! [`detected`] checks at run time before each safe entry point (`pairs::add_pairs_fq`,
//! `pairs::add_pairs_fq2`, `poseidon::first_words` (both permutation kernels),
//! `fp::power_chain`) calls in; the
//! gathers and scatters read and write only where that entry point has checked the indices,
//! and the loads and stores touch only local arrays.
//!
//! Values in flight are lazy: limbs below 2^52, value below 2p (what a Montgomery product of
//! two such values gives without a final subtraction, as 2^260 > 64p); what a kernel stores,
//! inverts or hands back is made canonical (below p) first, so results compare and decode
//! exactly. Montgomery multiplication interleaves the five reduction steps with the schoolbook
//! rows (CIOS): each row adds `a_i·b` and `m·p` to six 64-bit accumulators, which stay below
//! 2^58 (five rows of at most four 52-bit halves each, plus carries), so no intermediate carry
//! propagation is needed until the end; the result is below 2p.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod fp;
mod lanes;
pub(crate) mod pairs;
pub(crate) mod poseidon;
pub(crate) mod poseidon2;

pub(crate) use fp::power_chain;

/// Whether the CPU has AVX-512F and AVX-512 IFMA (cached by std after the first call).
pub(crate) fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512ifma")
}
