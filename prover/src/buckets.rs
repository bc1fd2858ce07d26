//! Bucket sums by batch-affine rounds, written once over the two forms points can take:
//! ark-ff's affine points ([`Vec<Affine<P>>`], the portable path) and lane-form words
//! ([`LanePoints`], summed on IFMA lanes).
//!
//! Each round adds every bucket's points pairwise (a bucket of `n` becomes `ceil(n/2)`), and
//! all of a round's additions share one field inversion (Montgomery's trick), so an addition
//! costs about six multiplications instead of the eleven of a mixed projective addition. Pairs
//! the affine formula does not cover (an identity, equal x: a doubling or a cancellation) are
//! rare and take the projective path one by one.

use std::marker::PhantomData;

use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ec::short_weierstrass::{Affine, Projective};
use ark_ec::CurveGroup;
use ark_ff::Field;

use crate::lanes::{AffineLanes, LaneField};

/// Points in the form a round's additions run in.
pub(crate) trait RoundPoints<P: GLVConfig>: Sized {
    /// Room for `len` points, each set before it is read.
    fn with_len(len: usize) -> Self;
    /// Point `index` as an affine point.
    fn affine(&self, index: usize) -> Affine<P>;
    /// Sets point `slot` to `point`.
    fn put(&mut self, slot: usize, point: &Affine<P>);
    /// Sets point `slot` to point `index` of `from`, mapped by the curve's endomorphism `φ` if
    /// `endo` (a GLV split's second half), then negated if `negate`.
    fn set(&mut self, slot: usize, from: &Self, index: usize, negate: bool, endo: bool);
    /// Whether points `k` and `k + 1` take the affine formula: both finite, distinct x.
    fn general(&self, k: usize) -> bool;
    /// `out[dsts[t]] = self[pairs[t]] + self[pairs[t] + 1]`, every pair [`general`](Self::general).
    fn add_general(&self, pairs: &[u32], dsts: &[u32], out: &mut Self);

    /// `out[slot] = self[k] + self[k + 1]` for any pair, by the projective formula.
    fn add_any(&self, k: usize, out: &mut Self, slot: usize) {
        let sum = (Projective::from(self.affine(k)) + self.affine(k + 1)).into_affine();
        out.put(slot, &sum);
    }
}

/// Sums each bucket's points (`points[bounds[b]..bounds[b+1]]`) in pairwise rounds; returns
/// each bucket's sum, `None` for an empty or cancelled bucket. `points` is reused for the rounds.
pub(crate) fn bucket_sums<P, S>(points: S, bounds: &[u32]) -> Vec<Option<Affine<P>>>
where
    P: GLVConfig,
    S: RoundPoints<P>,
{
    let buckets = bounds.len() - 1;
    // A round leaves ceil(n/2) of a bucket's n points: no more than the points, so the points'
    // own buffer takes the second round's sums, and one more buffer suffices.
    let room = bounds
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(2) as usize)
        .sum();
    let mut round = Round::default();
    let mut current = S::with_len(room);
    let mut bounds = round.run(&points, bounds, &mut current);
    let mut spare = points;
    while bounds.windows(2).any(|w| w[1] - w[0] > 1) {
        bounds = round.run(&current, &bounds, &mut spare);
        std::mem::swap(&mut current, &mut spare);
    }
    (0..buckets)
        .map(|b| {
            let point = (bounds[b] < bounds[b + 1]).then(|| current.affine(bounds[b] as usize))?;
            (!point.infinity).then_some(point)
        })
        .collect()
}

/// One round's pair lists, kept between rounds for their allocations.
#[derive(Default)]
struct Round {
    pairs: Vec<u32>,
    dsts: Vec<u32>,
}

impl Round {
    /// Adds each bucket's points (`source[bounds[b]..bounds[b+1]]`) pairwise into `out`;
    /// returns the bounds of the sums.
    fn run<P, S>(&mut self, source: &S, bounds: &[u32], out: &mut S) -> Vec<u32>
    where
        P: GLVConfig,
        S: RoundPoints<P>,
    {
        self.pairs.clear();
        self.dsts.clear();
        let mut next = Vec::with_capacity(bounds.len());
        next.push(0_u32);
        let mut written = 0_u32;
        for w in bounds.windows(2) {
            let (mut k, end) = (w[0], w[1]);
            while k + 1 < end {
                if source.general(k as usize) {
                    self.pairs.push(k);
                    self.dsts.push(written);
                } else {
                    source.add_any(k as usize, out, written as usize);
                }
                written += 1;
                k += 2;
            }
            if k < end {
                out.set(written as usize, source, k as usize, false, false);
                written += 1;
            }
            next.push(written);
        }
        source.add_general(&self.pairs, &self.dsts, out);
        next
    }
}

impl<P: GLVConfig> RoundPoints<P> for Vec<Affine<P>>
where
    P::BaseField: LaneField,
{
    fn with_len(len: usize) -> Self {
        vec![Affine::identity(); len]
    }

    fn affine(&self, index: usize) -> Affine<P> {
        self[index]
    }

    fn put(&mut self, slot: usize, point: &Affine<P>) {
        self[slot] = *point;
    }

    fn set(&mut self, slot: usize, from: &Self, index: usize, negate: bool, endo: bool) {
        let mut point = from[index];
        if endo {
            // φ(x, y) = (β·x, y): arkworks' `endomorphism_affine`, with β's product as cheap as
            // its field allows.
            point.x.scale_by(&P::ENDO_COEFFS[0]);
        }
        self[slot] = if negate { -point } else { point };
    }

    fn general(&self, k: usize) -> bool {
        let (p, q) = (&self[k], &self[k + 1]);
        !p.infinity && !q.infinity && p.x != q.x
    }

    fn add_general(&self, pairs: &[u32], dsts: &[u32], out: &mut Self) {
        let mut inverses: Vec<P::BaseField> = pairs
            .iter()
            .map(|&k| self[k as usize + 1].x - self[k as usize].x)
            .collect();
        P::BaseField::batch_invert(&mut inverses);
        for ((&k, &slot), inverse) in pairs.iter().zip(dsts).zip(&inverses) {
            let (p, q) = (&self[k as usize], &self[k as usize + 1]);
            let lambda = (q.y - p.y) * inverse;
            let x = lambda.square() - (p.x + q.x);
            let y = lambda * (p.x - x) - p.y;
            out[slot as usize] = Affine::new_unchecked(x, y);
        }
    }
}

/// Affine points in lane form: `x` then `y`, `F::WORDS` words each; the identity has
/// `u64::MAX` as its first word (never a canonical limb).
#[derive(Clone, Debug)]
pub(crate) struct LanePoints<F: AffineLanes> {
    words: Vec<u64>,
    field: PhantomData<F>,
}

impl<F: AffineLanes> LanePoints<F> {
    const STRIDE: usize = 2 * F::WORDS;
    const IDENTITY: u64 = u64::MAX;

    /// Heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.words.capacity() * size_of::<u64>()
    }

    fn point(&self, index: usize) -> &[u64] {
        &self.words[index * Self::STRIDE..(index + 1) * Self::STRIDE]
    }
}

impl<P: GLVConfig<BaseField = F>, F: AffineLanes> RoundPoints<P> for LanePoints<F> {
    fn with_len(len: usize) -> Self {
        Self {
            words: vec![0; len * Self::STRIDE],
            field: PhantomData,
        }
    }

    fn affine(&self, index: usize) -> Affine<P> {
        let words = self.point(index);
        if words[0] == Self::IDENTITY {
            return Affine::identity();
        }
        let (x, y) = words.split_at(F::WORDS);
        Affine::new_unchecked(F::decode(x), F::decode(y))
    }

    fn put(&mut self, slot: usize, point: &Affine<P>) {
        let words = &mut self.words[slot * Self::STRIDE..(slot + 1) * Self::STRIDE];
        if point.infinity {
            words.fill(0);
            words[0] = Self::IDENTITY;
        } else {
            let (x, y) = words.split_at_mut(F::WORDS);
            point.x.encode(x);
            point.y.encode(y);
        }
    }

    fn set(&mut self, slot: usize, from: &Self, index: usize, negate: bool, endo: bool) {
        if endo {
            // φ multiplies x by a constant: done in ark-ff form, then back to lanes.
            let mut point = RoundPoints::<P>::affine(from, index);
            point.x.scale_by(&P::ENDO_COEFFS[0]);
            RoundPoints::<P>::put(self, slot, &if negate { -point } else { point });
            return;
        }
        let target = &mut self.words[slot * Self::STRIDE..(slot + 1) * Self::STRIDE];
        target.copy_from_slice(from.point(index));
        if negate && target[0] != Self::IDENTITY {
            F::negate(&mut target[F::WORDS..]);
        }
    }

    fn general(&self, k: usize) -> bool {
        let (p, q) = (self.point(k), self.point(k + 1));
        p[0] != Self::IDENTITY && q[0] != Self::IDENTITY && p[..F::WORDS] != q[..F::WORDS]
    }

    fn add_general(&self, pairs: &[u32], dsts: &[u32], out: &mut Self) {
        if !F::add_pairs(&self.words, pairs, dsts, &mut out.words) {
            // No lanes after all (offsets beyond an i32): the projective path, pair by pair.
            for (&k, &slot) in pairs.iter().zip(dsts) {
                RoundPoints::<P>::add_any(self, k as usize, out, slot as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ec::AffineRepr;
    use ark_std::UniformRand;

    /// Gathering a point (negated, mapped by `φ`, or both) gives the same point in lane form as
    /// in ark-ff form; the conversions need no IFMA, so this runs on every CPU.
    fn gathers_alike<P: GLVConfig>()
    where
        P::BaseField: AffineLanes,
    {
        let mut rng = ark_std::test_rng();
        let mut points: Vec<Affine<P>> = (0..8).map(|_| Affine::rand(&mut rng)).collect();
        points.push(Affine::identity());
        let mut lanes = <LanePoints<P::BaseField> as RoundPoints<P>>::with_len(points.len());
        for (slot, point) in points.iter().enumerate() {
            RoundPoints::<P>::put(&mut lanes, slot, point);
        }
        for (index, point) in points.iter().enumerate() {
            for (negate, endo) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut portable = <Vec<Affine<P>> as RoundPoints<P>>::with_len(1);
                portable.set(0, &points, index, negate, endo);
                let mut lane = <LanePoints<P::BaseField> as RoundPoints<P>>::with_len(1);
                RoundPoints::<P>::set(&mut lane, 0, &lanes, index, negate, endo);
                let expected = if point.is_zero() {
                    Affine::identity()
                } else {
                    let mapped = if endo {
                        P::endomorphism_affine(point)
                    } else {
                        *point
                    };
                    if negate {
                        -mapped
                    } else {
                        mapped
                    }
                };
                assert_eq!(portable[0], expected);
                assert_eq!(RoundPoints::<P>::affine(&lane, 0), expected);
            }
        }
    }

    #[test]
    fn lane_and_portable_gathers_agree() {
        gathers_alike::<ark_bn254::g1::Config>();
        gathers_alike::<ark_bn254::g2::Config>();
    }
}
