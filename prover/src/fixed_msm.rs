//! Multi-scalar multiplication over bases fixed for the life of a process (a proving key's
//! queries): every base's window shifts `2^(c·j)·P` are computed once, so an MSM is one round of
//! bucket accumulation with no doublings, and one bucket reduction instead of one per window.
//!
//! - GLV: each scalar is split into two halves of 128 bits (`k = k₁ + λ·k₂`, [`crate::glv`]),
//!   the second against `φ(P) = (β·x, y)`, computed as an entry is gathered. The table keeps the
//!   shifts of 128-bit scalars only: half the memory of full-width shifts, the same entries.
//! - Signed digits in `[-2^(c-1), 2^(c-1)]`: half the buckets, negation is free in affine form.
//! - Batch-affine accumulation: each bucket's points are summed pairwise in rounds; every round's
//!   additions share one field inversion (Montgomery's trick), so an addition costs about six
//!   multiplications instead of the eleven of a mixed projective addition.
//! - Bounded working memory: an MSM's bucket entries are gathered as 8-byte references and
//!   counted by bucket; the points themselves are fetched for a run of consecutive buckets of
//!   at most [`RUN_ENTRIES`] entries at a time, each run summed to its buckets' final sums. So
//!   an MSM of any size holds its references, one run's points, and one sum per bucket.
//! - The bucket reduction `Σ (b+1)·S_b` in batch-affine form too: with `b = hi·2^h + lo`, the
//!   sums over `lo` and over `hi` are plain sums (batch-affine rounds), and only their two short
//!   weighted sums are projective: about four times cheaper than a running sum over every bucket.
//! - Identity bases (a proving key's A and B queries hold one for every wire absent from A or
//!   B) have no rows in the table, and their scalars are skipped.
//! - A zero scalar costs nothing; a scalar below `2^(c-1)` (0/1 flags, small counters: most of a
//!   circom witness's booleans) is one bucket entry, with no digit work beyond the first window.

use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ec::short_weierstrass::{Affine, Projective};
use ark_ec::{AdditiveGroup, CurveGroup};
use ark_ff::{PrimeField, Zero};

use crate::buckets::{bucket_sums, LanePoints, RoundPoints};
use crate::glv::{Splitter, HALF_BITS};
use crate::lanes::{AffineLanes, Arithmetic, LaneField};
use crate::ProverError;

/// Most bucket entries whose points an MSM fetches at once (a run of consecutive buckets; a
/// bucket with more is fetched alone): what bounds its working memory beyond the 8 bytes of
/// each entry's reference, about 110 bytes an entry for G1 and 210 for G2 with the rounds'
/// buffer.
pub const RUN_ENTRIES: usize = 1 << 15;

/// A table row that does not exist: the base is the identity.
const NO_ROW: u32 = u32::MAX;

/// How many of `bases` are not the identity: the rows a table of them holds.
pub(crate) fn finite_bases<P: GLVConfig>(bases: &[Affine<P>]) -> usize {
    bases.iter().filter(|b| !b.infinity).count()
}

/// How a [`FixedBaseMsm`] trades table memory for work, and what arithmetic it sums with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmConfig {
    /// Window width `c` in bits ([`MIN_WINDOW_BITS`](Self::MIN_WINDOW_BITS) to
    /// [`MAX_WINDOW_BITS`](Self::MAX_WINDOW_BITS), 2..=20). Larger windows mean fewer table points per base and
    /// fewer bucket entries per scalar, but `2^(c-1)` buckets to reduce.
    pub window_bits: u32,
    /// The bucket additions' field arithmetic.
    pub arithmetic: Arithmetic,
    /// The table keeps a shift every this many windows (`k ≥ 1`): `k` times less memory, for
    /// `k` bucket sets to reduce and `c·(k−1)` doublings per MSM. 1 keeps every window's
    /// shift; the window count or more keeps only the bases (a Pippenger MSM in batch-affine
    /// form, [`bases_only`](Self::bases_only)).
    pub shift_every: u32,
}

impl MsmConfig {
    /// The narrowest window a table takes.
    pub const MIN_WINDOW_BITS: u32 = 2;
    /// The widest window a table takes (2^19 buckets).
    pub const MAX_WINDOW_BITS: u32 = 20;

    /// [`for_bases_with`](Self::for_bases_with) [`Arithmetic::Auto`].
    #[must_use]
    pub fn for_bases(bases: usize) -> Self {
        Self::for_bases_with(bases, Arithmetic::Auto)
    }

    /// The window that minimises `entries + reduction` for `bases` bases of full-width scalars
    /// summed with `arithmetic`, every window's shift kept.
    #[must_use]
    pub fn for_bases_with(bases: usize, arithmetic: Arithmetic) -> Self {
        Self::cheapest(bases, arithmetic, |_| 1)
    }

    /// The window that minimises `entries + reduction` for `bases` bases with no shifts kept:
    /// the table is a copy of the bases, one bucket set per window (a Pippenger MSM in
    /// batch-affine form, with no doublings but the `c` per set that combine the sets).
    #[must_use]
    pub fn bases_only(bases: usize, arithmetic: Arithmetic) -> Self {
        Self::cheapest(bases, arithmetic, |windows| windows)
    }

    /// The window of least estimated cost for `bases` bases, `shift_every(windows)` giving the
    /// shifts kept. Each base adds two halves' windows of bucket entries (a batch-affine
    /// addition each); each bucket set's reduction costs about two batch-affine additions a
    /// bucket ([`weighted_sum`]).
    fn cheapest(bases: usize, arithmetic: Arithmetic, shift_every: impl Fn(u32) -> u32) -> Self {
        let config = |c: u32| {
            let windows = HALF_BITS + 1;
            Self {
                window_bits: c,
                arithmetic,
                shift_every: shift_every(windows.div_ceil(c)),
            }
        };
        let cost = |c: u32| {
            let config = config(c);
            let windows = u64::from(config.table_windows());
            let sets = u64::from(config.shift_every.clamp(1, config.table_windows()));
            2 * windows * bases as u64 + sets * 2 * (1_u64 << (c - 1))
        };
        config((4..=16).min_by_key(|&c| cost(c)).unwrap_or(12))
    }

    /// The number of windows of a `scalar_bits`-bit scalar under `window_bits` (`c·windows`
    /// exceeds the scalar's bits, so the top window's signed digit never carries out).
    #[must_use]
    pub fn windows(&self, scalar_bits: u32) -> u32 {
        (scalar_bits + 1).div_ceil(self.window_bits.max(1))
    }

    /// The windows a table covers: those of one half of a GLV-split scalar (128 bits).
    #[must_use]
    pub fn table_windows(&self) -> u32 {
        self.windows(HALF_BITS)
    }
}

/// A table's shape: whether it holds lane-form points, how many windows a scalar has, and how
/// many of their shifts the table keeps per base (one every `every` windows).
struct Layout {
    lanes: bool,
    windows: usize,
    every: usize,
    stored: usize,
}

/// The window shifts, in the form the bucket additions run in.
#[derive(Clone, Debug)]
enum Table<P: GLVConfig>
where
    P::BaseField: AffineLanes,
{
    Portable(Vec<Affine<P>>),
    Lanes(LanePoints<P::BaseField>),
}

/// Precomputed window shifts of fixed bases, for MSMs against any scalars of their field.
///
/// The bases' field must have a lane form ([`AffineLanes`]: BN254's G1 and G2), which the IFMA
/// path sums in.
#[derive(Clone, Debug)]
pub struct FixedBaseMsm<P: GLVConfig>
where
    P::BaseField: AffineLanes,
{
    /// How a scalar splits into the two halves the table's shifts cover.
    splitter: Splitter,
    /// Each base's row in the table, [`NO_ROW`] for the identity (whose scalar is skipped: its
    /// entries would cost nothing but projective additions).
    rows: Vec<u32>,
    /// Most entries fetched at once, by all threads together ([`RUN_ENTRIES`]; smaller in
    /// tests, to cover runs).
    run_limit: usize,
    window_bits: u32,
    windows: usize,
    /// A shift every this many windows (`k`).
    every: usize,
    /// Shifts kept per base: `ceil(windows / k)`.
    stored: usize,
    bases: usize,
    /// Point `rows[i]·stored + s` is `2^(c·k·s)·base_i`.
    table: Table<P>,
}

impl<P: GLVConfig> FixedBaseMsm<P>
where
    P::BaseField: AffineLanes,
{
    /// Computes the window shifts of every base.
    ///
    /// # Errors
    /// [`ProverError::WindowBits`] for a window outside 2..=20, [`ProverError::TooManyBases`]
    /// past 2^32 table points, [`ProverError::NoIfma`] for [`Arithmetic::Ifma`] on a CPU
    /// without it.
    pub fn new(bases: &[Affine<P>], config: MsmConfig) -> Result<Self, ProverError> {
        // A slice of bases at a time: only one slice's projective points exist at once, so the
        // build's peak memory is the table's plus a few MiB, not two and a half tables.
        const SLICE: usize = 1024;
        let c = config.window_bits;
        let Layout {
            lanes,
            windows,
            every,
            stored,
        } = Self::layout(bases, config)?;
        let step = c * u32::try_from(every).map_err(|_| ProverError::WindowBits(c))?;
        let mut next_row = 0_u32;
        let rows = bases
            .iter()
            .map(|base| {
                if base.infinity {
                    NO_ROW
                } else {
                    next_row += 1;
                    next_row - 1
                }
            })
            .collect();
        let finite: Vec<Affine<P>> = bases.iter().filter(|b| !b.infinity).copied().collect();
        let slices = finite
            .chunks(SLICE)
            .map(|slice| Self::shifts(slice, stored, step));
        let table = if lanes {
            let mut points =
                <LanePoints<P::BaseField> as RoundPoints<P>>::with_len(finite.len() * stored);
            for (slot, point) in slices.flatten().enumerate() {
                RoundPoints::<P>::put(&mut points, slot, &point);
            }
            Table::Lanes(points)
        } else {
            let mut points = Vec::with_capacity(finite.len() * stored);
            for slice in slices {
                points.extend_from_slice(&slice);
            }
            Table::Portable(points)
        };
        Ok(Self {
            splitter: Splitter::new::<P>(),
            rows,
            run_limit: RUN_ENTRIES,
            window_bits: c,
            windows,
            every,
            stored,
            bases: bases.len(),
            table,
        })
    }

    /// The shifts `2^(step·s)·base` of each of `bases`, `stored` per base, in affine form.
    fn shifts(bases: &[Affine<P>], stored: usize, step: u32) -> Vec<Affine<P>> {
        let row = |base: &Affine<P>| {
            let mut point = Projective::<P>::from(*base);
            let mut row = Vec::with_capacity(stored);
            for s in 0..stored {
                row.push(point);
                if s + 1 < stored {
                    for _ in 0..step {
                        point.double_in_place();
                    }
                }
            }
            row
        };
        #[cfg(feature = "parallel")]
        let projective: Vec<Projective<P>> = {
            use rayon::prelude::*;
            bases.par_iter().flat_map_iter(row).collect()
        };
        #[cfg(not(feature = "parallel"))]
        let projective: Vec<Projective<P>> = bases.iter().flat_map(row).collect();
        Projective::normalize_batch(&projective)
    }

    /// Heap bytes [`new`](Self::new) would allocate for the table of `bases` under `config`
    /// (for fitting tables to a memory budget before building them).
    ///
    /// # Errors
    /// As [`new`](Self::new) would refuse `config`.
    pub fn table_bytes_for(bases: &[Affine<P>], config: MsmConfig) -> Result<usize, ProverError> {
        let Layout { lanes, stored, .. } = Self::layout(bases, config)?;
        let bases = finite_bases(bases);
        let point = if lanes {
            2 * <P::BaseField as LaneField>::WORDS * size_of::<u64>()
        } else {
            size_of::<Affine<P>>()
        };
        Ok(bases * stored * point)
    }

    /// The table's shape under `config`, or why `config` is refused.
    fn layout(bases: &[Affine<P>], config: MsmConfig) -> Result<Layout, ProverError> {
        let c = config.window_bits;
        if !(MsmConfig::MIN_WINDOW_BITS..=MsmConfig::MAX_WINDOW_BITS).contains(&c) {
            return Err(ProverError::WindowBits(c));
        }
        let lanes = config.arithmetic.uses_lanes()?;
        // c·windows > a half's bits, so the top window's digit never carries out (see `digits`).
        let windows =
            usize::try_from(config.table_windows()).map_err(|_| ProverError::WindowBits(c))?;
        // A shift every `every` windows; more than the window count keeps the same one shift.
        let every = (config.shift_every.max(1) as usize).min(windows);
        let stored = windows.div_ceil(every);
        let entries = bases.len().checked_mul(stored);
        if entries.is_none_or(|n| u32::try_from(n).is_err()) {
            return Err(ProverError::TooManyBases(bases.len()));
        }
        Ok(Layout {
            lanes,
            windows,
            every,
            stored,
        })
    }

    /// Number of bases.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bases
    }

    /// Whether there are no bases.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bases == 0
    }

    /// Heap bytes of the precomputed table.
    #[must_use]
    pub fn table_bytes(&self) -> usize {
        match &self.table {
            Table::Portable(points) => points.capacity() * size_of::<Affine<P>>(),
            Table::Lanes(points) => points.bytes(),
        }
    }

    /// The arithmetic this table sums with: [`Arithmetic::Ifma`] or [`Arithmetic::Portable`].
    #[must_use]
    pub fn arithmetic(&self) -> Arithmetic {
        match self.table {
            Table::Portable(_) => Arithmetic::Portable,
            Table::Lanes(_) => Arithmetic::Ifma,
        }
    }

    /// `Σ scalars[i]·bases[i]`.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] unless there is exactly one scalar per base.
    pub fn msm(&self, scalars: &[P::ScalarField]) -> Result<Projective<P>, ProverError> {
        if scalars.len() != self.bases {
            return Err(ProverError::ScalarCount {
                expected: self.bases,
                got: scalars.len(),
            });
        }
        // One part per thread, with equal numbers of nonzero scalars (a finish step's
        // assignment is mostly zeros, bunched in a few ranges of wires): each sums its own
        // buckets over its own part of the table, a run of buckets at a time, and reduces them
        // once.
        #[cfg(feature = "parallel")]
        let parts = rayon::current_num_threads().max(1);
        #[cfg(not(feature = "parallel"))]
        let parts = 1;
        let nonzero = scalars.iter().filter(|s| !s.is_zero()).count();
        let mut bounds = vec![0_usize];
        let mut seen = 0_usize;
        for (i, scalar) in scalars.iter().enumerate() {
            if !scalar.is_zero() {
                seen += 1;
                if seen * parts >= nonzero * bounds.len() && bounds.len() < parts {
                    bounds.push(i + 1);
                }
            }
        }
        bounds.push(scalars.len());
        // The parts share the working memory one MSM may hold.
        let run_entries = (self.run_limit / parts).max(1);
        #[cfg(feature = "parallel")]
        let sums = {
            use rayon::prelude::*;
            bounds
                .par_windows(2)
                .map(|w| self.msm_range(w[0], &scalars[w[0]..w[1]], run_entries))
                .collect::<Vec<_>>()
        };
        #[cfg(not(feature = "parallel"))]
        let sums = bounds
            .windows(2)
            .map(|w| self.msm_range(w[0], &scalars[w[0]..w[1]], run_entries))
            .collect::<Vec<_>>();
        sums.into_iter().sum()
    }

    /// The MSM of `scalars` against the bases from `first` on, on this thread, fetching at
    /// most `run_entries` points at once.
    fn msm_range(
        &self,
        first: usize,
        scalars: &[P::ScalarField],
        run_entries: usize,
    ) -> Result<Projective<P>, ProverError> {
        match &self.table {
            Table::Portable(table) => self.msm_range_in(table, first, scalars, run_entries),
            Table::Lanes(table) => self.msm_range_in(table, first, scalars, run_entries),
        }
    }

    /// [`msm_range`](Self::msm_range) with the table's points in form `S`.
    fn msm_range_in<S>(
        &self,
        table: &S,
        first: usize,
        scalars: &[P::ScalarField],
        run_entries: usize,
    ) -> Result<Projective<P>, ProverError>
    where
        S: RoundPoints<P>,
    {
        let buckets = 1_usize << (self.window_bits - 1);
        // Window j's digit goes to bucket set j mod k, against the shift kept for j div k.
        let sets = self.every;
        // Every entry: (bucket·4 + φ·2 + negative, table index).
        let mut entries: Vec<(u32, u32)> = Vec::new();
        let mut digits = Vec::with_capacity(self.windows);
        for (i, scalar) in scalars.iter().enumerate() {
            let row = self.rows[first + i];
            if scalar.is_zero() || row == NO_ROW {
                continue;
            }
            let halves = self
                .splitter
                .split(&scalar.into_bigint())
                .ok_or(ProverError::ScalarSplit)?;
            let row = row as usize * self.stored;
            for (half, (negative, magnitude)) in halves.into_iter().enumerate() {
                signed_digits(magnitude, self.window_bits, &mut digits);
                for (j, &digit) in digits.iter().enumerate() {
                    let Some(bucket) = (digit.unsigned_abs() as usize).checked_sub(1) else {
                        continue;
                    };
                    let bucket = (j % sets) * buckets + bucket;
                    // `new` checked that every table index fits a u32, and a bucket index is
                    // below windows·2^19.
                    let index = u32::try_from(row + j / sets).unwrap_or(u32::MAX);
                    let bucket = u32::try_from(bucket).unwrap_or(u32::MAX >> 2);
                    let flags = u32::from(half == 1) << 1 | u32::from((digit < 0) != negative);
                    entries.push((bucket << 2 | flags, index));
                }
            }
        }
        // Each bucket's first entry in bucket order (a counting sort's bounds).
        let mut bounds = vec![0_u32; sets * buckets + 1];
        for &(tag, _) in &entries {
            bounds[(tag >> 2) as usize + 1] += 1;
        }
        for b in 1..bounds.len() {
            bounds[b] += bounds[b - 1];
        }
        // Runs of consecutive buckets, at most `run_entries` entries each (or one bucket),
        // fetched and summed to their final sums.
        let mut runs = Vec::new(); // first bucket of each run, then the end
        let mut b0 = 0;
        while b0 < buckets * sets {
            runs.push(b0);
            let start = bounds[b0];
            b0 += 1;
            while b0 < buckets * sets && (bounds[b0 + 1] - start) as usize <= run_entries {
                b0 += 1;
            }
        }
        runs.push(buckets * sets);
        // The entries grouped by run, each run's still in scalar order: a run's points are
        // then fetched reading the table in order (random reads of a table of megabytes
        // stall; the random writes into the run's buffer do not).
        if runs.len() > 2 {
            let mut run_of = vec![0_u32; buckets * sets];
            for (r, w) in runs.windows(2).enumerate() {
                run_of[w[0]..w[1]].fill(u32::try_from(r).unwrap_or(u32::MAX));
            }
            let mut next: Vec<u32> = runs[..runs.len() - 1].iter().map(|&b| bounds[b]).collect();
            let mut grouped = vec![(0_u32, 0_u32); entries.len()];
            for &entry in &entries {
                let slot = &mut next[run_of[(entry.0 >> 2) as usize] as usize];
                grouped[*slot as usize] = entry;
                *slot += 1;
            }
            entries = grouped;
        }
        let mut sums: Vec<Option<Affine<P>>> = vec![None; sets * buckets];
        for w in runs.windows(2) {
            let (b0, b1) = (w[0], w[1]);
            let start = bounds[b0];
            let run = &entries[start as usize..bounds[b1] as usize];
            if run.is_empty() {
                continue;
            }
            let mut points = S::with_len(run.len());
            let mut next: Vec<u32> = bounds[b0..b1].iter().map(|b| b - start).collect();
            for &(tag, index) in run {
                let slot = &mut next[(tag >> 2) as usize - b0];
                points.set(
                    *slot as usize,
                    table,
                    index as usize,
                    tag & 1 == 1,
                    tag & 2 == 2,
                );
                *slot += 1;
            }
            let run_bounds: Vec<u32> = bounds[b0..=b1].iter().map(|b| b - start).collect();
            sums[b0..b1].copy_from_slice(&bucket_sums(points, &run_bounds));
        }
        // The sets by Horner's rule, set o weighing 2^(c·o).
        let mut total = Projective::<P>::zero();
        for set in sums.chunks(buckets).rev() {
            for _ in 0..self.window_bits {
                total.double_in_place();
            }
            total += weighted_sum::<P, S>(set);
        }
        Ok(total)
    }
}

/// `Σ (b+1)·sums[b]` over a power-of-two number of buckets. With `b = hi·2^h + lo`:
/// `Σ (b+1)·S_b = 2^h·Σ hi·T_hi + Σ (lo+1)·U_lo`, where `T_hi = Σ_lo S_b` and `U_lo = Σ_hi S_b`
/// are plain sums, taken in batch-affine rounds, and only the two weighted sums of
/// `2^h` and `n/2^h` terms run projective.
fn weighted_sum<P, S>(sums: &[Option<Affine<P>>]) -> Projective<P>
where
    P: GLVConfig,
    S: RoundPoints<P>,
{
    let h = sums.len().trailing_zeros() / 2;
    let low = 1_usize << h;
    let by_high = group_sums::<P, S>(sums, sums.len() >> h, |b| b >> h);
    let by_low = group_sums::<P, S>(sums, low, |b| b & (low - 1));
    // Running sums from the top: Σ (i+1)·X_i, and Σ X_i.
    let running = |xs: &[Option<Affine<P>>]| {
        let (mut total, mut running) = (Projective::<P>::zero(), Projective::<P>::zero());
        for x in xs.iter().rev() {
            if let Some(x) = x {
                running += x;
            }
            total += running;
        }
        (total, running)
    };
    let (high_weighted, high_sum) = running(&by_high);
    // Σ hi·T_hi = Σ (hi+1)·T_hi − Σ T_hi.
    let mut result = high_weighted - high_sum;
    for _ in 0..h {
        result.double_in_place();
    }
    result + running(&by_low).0
}

/// `groups` sums of `sums`' points, point `b` going to group `key(b)`, in batch-affine rounds.
fn group_sums<P, S>(
    sums: &[Option<Affine<P>>],
    groups: usize,
    key: impl Fn(usize) -> usize,
) -> Vec<Option<Affine<P>>>
where
    P: GLVConfig,
    S: RoundPoints<P>,
{
    let mut bounds = vec![0_u32; groups + 1];
    for (b, sum) in sums.iter().enumerate() {
        bounds[key(b) + 1] += u32::from(sum.is_some());
    }
    for g in 1..bounds.len() {
        bounds[g] += bounds[g - 1];
    }
    let mut points = S::with_len(bounds[groups] as usize);
    let mut next = bounds.clone();
    for (b, sum) in sums.iter().enumerate() {
        if let Some(sum) = sum {
            let slot = &mut next[key(b)];
            points.put(*slot as usize, sum);
            *slot += 1;
        }
    }
    bucket_sums(points, &bounds)
}

/// The signed base-`2^c` digits of `magnitude`, lowest first, each in `[-2^(c-1), 2^(c-1)]`;
/// stops after the highest nonzero digit.
fn signed_digits(magnitude: u128, c: u32, out: &mut Vec<i32>) {
    out.clear();
    let mask = (1_u128 << c) - 1;
    let half = 1_i64 << (c - 1);
    let mut rest = magnitude;
    let mut carry = 0_i64;
    while rest != 0 || carry != 0 {
        // Both parts are below 2^20 and 1, so the sum fits an i64 with room to spare.
        let mut digit = i64::try_from(rest & mask).unwrap_or(0) + carry;
        rest = rest.checked_shr(c).unwrap_or(0);
        carry = 0;
        if digit > half {
            digit -= 1 << c;
            carry = 1;
        }
        out.push(i32::try_from(digit).unwrap_or(0));
    }
    while out.last() == Some(&0) {
        out.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lanes::ifma_available;
    use ark_bn254::{Fr, G1Affine, G1Projective};
    use ark_ec::{PrimeGroup, VariableBaseMSM};
    use ark_std::UniformRand;

    fn reference(bases: &[G1Affine], scalars: &[Fr]) -> G1Projective {
        G1Projective::msm(bases, scalars).unwrap_or_default()
    }

    #[test]
    fn digits_recompose_the_magnitude() {
        let mut rng = ark_std::test_rng();
        let mut digits = Vec::new();
        for c in [2, 5, 8, 12, 13, 16, 20] {
            for magnitude in [0, 1, u128::MAX, u128::MAX >> 1, rand::Rng::gen(&mut rng)] {
                signed_digits(magnitude, c, &mut digits);
                assert!(
                    digits.len() <= (HALF_BITS + 1).div_ceil(c) as usize,
                    "c = {c}"
                );
                let radix = Fr::from(1_u64 << c);
                let value = digits.iter().rev().fold(Fr::zero(), |acc, &d| {
                    let digit = Fr::from(d.unsigned_abs());
                    acc * radix + if d < 0 { -digit } else { digit }
                });
                assert_eq!(value, Fr::from(magnitude), "c = {c}");
                let half = 1_i32 << (c - 1);
                assert!(digits.iter().all(|d| (-half..=half).contains(d)));
            }
        }
    }

    #[test]
    fn equals_arkworks_on_edge_scalars_and_bases() {
        let mut rng = ark_std::test_rng();
        let g = G1Projective::generator();
        // Repeated, opposite and identity bases exercise every branch of the affine addition.
        let mut bases: Vec<G1Affine> = (0..40).map(|_| G1Affine::rand(&mut rng)).collect();
        bases.extend([bases[0], -bases[1], G1Affine::identity(), g.into_affine()]);
        let scalar_sets: Vec<Vec<Fr>> = vec![
            vec![Fr::zero(); bases.len()],
            vec![Fr::from(1u8); bases.len()],
            (0..bases.len()).map(|i| Fr::from(i as u64 % 3)).collect(),
            (0..bases.len()).map(|_| Fr::rand(&mut rng)).collect(),
            (0..bases.len()).map(|i| -Fr::from(i as u64)).collect(),
        ];
        let mut arithmetics = vec![Arithmetic::Portable];
        if ifma_available() {
            arithmetics.push(Arithmetic::Ifma);
        } else {
            eprintln!("no AVX-512 IFMA on this CPU: the lane path is not tested here");
        }
        // Every window's shift, one every 2 or 3 windows, and the bases alone (k ≥ windows).
        for (c, arithmetic, k) in [2, 3, 8, 13]
            .into_iter()
            .flat_map(|c| arithmetics.iter().map(move |&a| (c, a)))
            .flat_map(|(c, a)| [1, 2, 3, 300].map(|k| (c, a, k)))
        {
            let config = MsmConfig {
                window_bits: c,
                arithmetic,
                shift_every: k,
            };
            let mut msm = FixedBaseMsm::new(&bases, config).unwrap();
            assert_eq!(msm.arithmetic(), arithmetic);
            assert_eq!(
                FixedBaseMsm::<ark_bn254::g1::Config>::table_bytes_for(&bases, config),
                Ok(msm.table_bytes())
            );
            for scalars in &scalar_sets {
                let expected = Some(reference(&bases, scalars));
                // In one run of buckets, and in runs of at most 1 and 7 entries.
                for run_limit in [RUN_ENTRIES, 1, 7] {
                    msm.run_limit = run_limit;
                    assert_eq!(
                        msm.msm(scalars).ok(),
                        expected,
                        "c = {c}, k = {k}, {arithmetic:?}, runs of {run_limit}"
                    );
                }
                // Buckets split three ways (and, for c = 2, more threads than buckets).
                #[cfg(feature = "parallel")]
                {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(3)
                        .build()
                        .unwrap();
                    assert_eq!(
                        pool.install(|| msm.msm(scalars)).ok(),
                        expected,
                        "c = {c}, k = {k}, 3 threads"
                    );
                }
            }
        }
    }

    #[test]
    fn refuses_bad_inputs() {
        let bases = [G1Affine::identity(); 3];
        assert!(matches!(
            FixedBaseMsm::new(
                &bases,
                MsmConfig {
                    window_bits: 1,
                    arithmetic: Arithmetic::Auto,
                    shift_every: 1,
                }
            ),
            Err(ProverError::WindowBits(1))
        ));
        let ifma = MsmConfig {
            window_bits: 8,
            arithmetic: Arithmetic::Ifma,
            shift_every: 1,
        };
        assert_eq!(
            FixedBaseMsm::new(&bases, ifma).is_ok(),
            ifma_available(),
            "Ifma refused exactly where the CPU lacks it"
        );
        let msm = FixedBaseMsm::new(&bases, MsmConfig::for_bases(3)).unwrap();
        assert!(matches!(
            msm.msm(&[Fr::zero(); 2]),
            Err(ProverError::ScalarCount {
                expected: 3,
                got: 2
            })
        ));
    }
}
