//! Batch-affine addition of pairs of points on lanes (`Fq` for G1, `Fq2` for G2): the
//! prover's bucket sums, behind the checks the kernel needs of its input.

use core::arch::x86_64::_mm256_loadu_si256;

use crate::LaneField;

use super::detected;
use super::fp::Fp8;
use super::lanes::{Fq2x8, Lanes};
use ark_bn254::Fq;
use ark_ff::One;

/// Word offsets of the points `indices` name, padded to whole groups of eight with the first
/// (a real pair keeps its lane's product nonzero; its lanes are masked off when storing).
fn word_offsets(indices: &[u32], stride: usize) -> Vec<i32> {
    let padded = indices.len().div_ceil(8) * 8;
    // The entry point checked that every offset fits an i32.
    let offset = |index: u32| i32::try_from(index as usize * stride).unwrap_or(0);
    let first = indices.first().copied().unwrap_or(0);
    let mut offsets: Vec<i32> = indices.iter().map(|&index| offset(index)).collect();
    offsets.resize(padded, offset(first));
    offsets
}

/// Batch-affine addition of pairs of points on lanes: lane `j` takes pairs `j, j+8, j+16, ...`,
/// runs its own prefix product of the denominators `x_q - x_p`, and the eight lane products are
/// inverted together; the backward pass peels one inverse per pair off its lane's product.
/// Six multiplications per pair.
///
/// # Safety
/// AVX-512F and AVX-512 IFMA; `pairs` and `dsts` of one length; points `pairs[t]` and
/// `pairs[t] + 1` lie in `points` and point `dsts[t]` in `out` (points of `2·WORDS` words);
/// every word offset fits an i32.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn add_pairs<L: Lanes>(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) {
    let words = L::Field::WORDS;
    let stride = 2 * words;
    let groups = pairs.len().div_ceil(8);
    if groups == 0 {
        return;
    }
    let (base, target) = (points.as_ptr(), out.as_mut_ptr());
    let (src, dst) = (word_offsets(pairs, stride), word_offsets(dsts, stride));
    let last_mask = u8::MAX >> (groups * 8 - pairs.len());
    let mut prefix: Vec<L> = Vec::with_capacity(groups);
    // SAFETY: the target features are this function's.
    let mut product = unsafe { L::splat_field(&L::Field::one()) };
    // SAFETY: the target features are this function's; every gather reads the x words (0 to
    // WORDS) of points `pairs[t]` and `pairs[t] + 1`, which the caller keeps in `points`, and
    // `base.add` stays inside it (at least one pair, so two points); `src` holds whole groups.
    unsafe {
        for g in 0..groups {
            let offsets = _mm256_loadu_si256(src.as_ptr().add(8 * g).cast());
            let xp = L::gather(base, offsets);
            let xq = L::gather(base.add(stride), offsets);
            prefix.push(product);
            product = product.mul(xq.sub_wide(xp));
        }
    }
    // SAFETY: the target features are this function's.
    let mut inverse = unsafe { product.invert() };
    // SAFETY: as above for the gathers (y at words WORDS to 2·WORDS, inside each point); the
    // scatters write point `dsts[t]` of `out` for the real lanes only (the last group's mask),
    // which the caller keeps in `out`.
    unsafe {
        for (g, before) in prefix.iter().enumerate().rev() {
            let offsets = _mm256_loadu_si256(src.as_ptr().add(8 * g).cast());
            let targets = _mm256_loadu_si256(dst.as_ptr().add(8 * g).cast());
            let mask = if g + 1 == groups { last_mask } else { u8::MAX };
            let xp = L::gather(base, offsets);
            let xq = L::gather(base.add(stride), offsets);
            let yp = L::gather(base.add(words), offsets);
            let yq = L::gather(base.add(stride + words), offsets);
            let inv = before.mul(inverse);
            inverse = inverse.mul(xq.sub_wide(xp));
            let lambda = yq.sub_wide(yp).mul(inv);
            let x = lambda.square().sub(xp).sub(xq);
            let y = lambda.mul(xp.sub_wide(x)).sub(yp);
            x.canonical().scatter(target, targets, mask);
            y.canonical().scatter(target.add(words), targets, mask);
        }
    }
}

/// Checks what [`add_pairs`] needs of its input: indices in range, offsets that fit an i32, and
/// distinct x within each pair (a zero denominator would turn its lane's whole product, and so
/// every inverse peeled off it, into zero: wrong sums reported as success).
fn pairs_fit(points: &[u64], pairs: &[u32], dsts: &[u32], out: &[u64], words: usize) -> bool {
    let stride = 2 * words;
    let fits_i32 = |len: usize| i32::try_from(len).is_ok();
    let inside = |list: &[u32], span: usize, len: usize| {
        list.iter().all(|&i| {
            (i as usize + span)
                .checked_mul(stride)
                .is_some_and(|end| end <= len)
        })
    };
    let distinct_x = || {
        pairs.iter().all(|&i| {
            let p = i as usize * stride;
            points.get(p..p + words) != points.get(p + stride..p + stride + words)
        })
    };
    pairs.len() == dsts.len()
        && fits_i32(points.len())
        && fits_i32(out.len())
        && inside(pairs, 2, points.len())
        && inside(dsts, 1, out.len())
        && distinct_x()
}

/// [`add_pairs`] behind the checks it needs: `false` (nothing written) without the CPU
/// features or with input it cannot take.
fn add_pairs_checked<L: Lanes>(
    points: &[u64],
    pairs: &[u32],
    dsts: &[u32],
    out: &mut [u64],
) -> bool {
    if !detected() || !pairs_fit(points, pairs, dsts, out, L::Field::WORDS) {
        return false;
    }
    // SAFETY: the CPU features were detected and the input checked just above.
    unsafe { add_pairs::<L>(points, pairs, dsts, out) };
    true
}

/// [`AffineLanes::add_pairs`](crate::AffineLanes::add_pairs) for `Fq`.
pub(crate) fn add_pairs_fq(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fp8<Fq>>(points, pairs, dsts, out)
}

/// [`AffineLanes::add_pairs`](crate::AffineLanes::add_pairs) for `Fq2`.
pub(crate) fn add_pairs_fq2(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fq2x8>(points, pairs, dsts, out)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::LIMBS;

    /// `count` distinct affine G1 points in lane form (`k·G` for k = 1..=count), and the points.
    fn g1_points(count: usize) -> (Vec<u64>, Vec<ark_bn254::G1Affine>) {
        use ark_ec::{AffineRepr, CurveGroup};
        let g = ark_bn254::G1Affine::generator();
        let points: Vec<ark_bn254::G1Affine> = (1..=count as u64)
            .map(|k| (g * ark_bn254::Fr::from(k * k + 7)).into_affine())
            .collect();
        let mut words = vec![0_u64; count * 2 * LIMBS];
        for (p, w) in points.iter().zip(words.chunks_exact_mut(2 * LIMBS)) {
            p.x.encode(&mut w[..LIMBS]);
            p.y.encode(&mut w[LIMBS..]);
        }
        (words, points)
    }

    #[test]
    fn refuses_input_it_cannot_take() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: add_pairs not tested here");
            return;
        }
        let (points, _) = g1_points(4);
        let mut out = vec![0_u64; 2 * 2 * LIMBS];
        assert!(add_pairs_fq(&points, &[2], &[1], &mut out), "in range");
        assert!(
            !add_pairs_fq(&points, &[3], &[0], &mut out),
            "second point past the end"
        );
        assert!(
            !add_pairs_fq(&points, &[0], &[2], &mut out),
            "destination past the end"
        );
        assert!(
            !add_pairs_fq(&points, &[0, 1], &[0], &mut out),
            "lengths differ"
        );
        assert!(
            !add_pairs_fq2(&points, &[1], &[0], &mut out),
            "Fq2 points are twice as long"
        );
        // A pair with equal x (P and -P, or P twice): refused, nothing written.
        let mut twin = points.clone();
        twin.copy_within(0..LIMBS, 2 * LIMBS);
        let before = out.clone();
        assert!(!add_pairs_fq(&twin, &[2, 0], &[0, 1], &mut out), "equal x");
        assert_eq!(out, before, "nothing written");
    }

    /// Every pair of a batch whose length is not a multiple of eight sums right, and the padding
    /// lanes (which repeat pair 0) write nothing: sentinels around and between the destinations
    /// survive.
    #[test]
    fn tail_lanes_write_nothing() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: add_pairs not tested here");
            return;
        }
        let (points, affine) = g1_points(40);
        for count in [1_usize, 7, 9, 15, 17] {
            let index = |t: usize| u32::try_from(t).unwrap();
            let pairs: Vec<u32> = (0..count).map(|t| index(2 * t)).collect();
            // Destinations 1, 3, 5, ...: slot 0 (pair 0's would-be padding target) and every
            // even slot stay sentinels.
            let dsts: Vec<u32> = (0..count).map(|t| index(2 * t + 1)).collect();
            let sentinel = 0x5eed_5eed_5eed_u64;
            let mut out = vec![sentinel; (2 * count + 2) * 2 * LIMBS];
            assert!(add_pairs_fq(&points, &pairs, &dsts, &mut out));
            for (slot, point) in out.chunks_exact(2 * LIMBS).enumerate() {
                if slot % 2 == 0 || slot > 2 * count {
                    assert!(
                        point.iter().all(|&w| w == sentinel),
                        "slot {slot} of {count}"
                    );
                } else {
                    let t = slot / 2;
                    let want: ark_bn254::G1Affine = (affine[2 * t] + affine[2 * t + 1]).into();
                    let got = ark_bn254::G1Affine::new_unchecked(
                        Fq::decode(&point[..LIMBS]),
                        Fq::decode(&point[LIMBS..]),
                    );
                    assert_eq!(got, want, "pair {t} of {count}");
                }
            }
        }
    }
}
