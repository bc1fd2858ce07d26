//! Groth16 proofs for circom circuits over BN254, with every query of the proving key held as a
//! [`FixedBaseMsm`] table.
//!
//! The proof is the standard one (any Groth16 verifier accepts it); the quotient polynomial is
//! computed as snarkjs does, which is what circom proving keys are made for: the evaluations of
//! A·z and B·z over the constraint domain (the public inputs appended to A as extra rows, C·z
//! taken as their product), moved to the coset of the doubled domain's generator, where
//! `A·B - C` gives H's coefficients against the key's H query directly.

use ark_bn254::{Bn254, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::CurveGroup;
use ark_ff::{UniformRand, Zero};
use ark_groth16::{Proof, ProvingKey};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use ark_std::rand::{CryptoRng, RngCore};
use zeroize::Zeroizing;

use crate::fft::Fft;
use crate::fixed_msm::finite_bases;
use crate::{FixedBaseMsm, MsmConfig, ProverConfig, ProverError};

/// One constraint's linear combination: (coefficient, wire) pairs.
pub type Row = Vec<(Fr, usize)>;

/// A circom proving key prepared for fast proving: its five queries as fixed-base tables, and
/// the A and B rows of its constraints for the quotient.
pub struct CircomProver {
    alpha_g1: G1Affine,
    beta_g1: G1Affine,
    beta_g2: G2Affine,
    delta_g1: G1Affine,
    delta_g2: G2Affine,
    a: FixedBaseMsm<ark_bn254::g1::Config>,
    b_g1: FixedBaseMsm<ark_bn254::g1::Config>,
    b_g2: FixedBaseMsm<ark_bn254::g2::Config>,
    h: FixedBaseMsm<ark_bn254::g1::Config>,
    l: FixedBaseMsm<ark_bn254::g1::Config>,
    a_rows: Vec<Row>,
    b_rows: Vec<Row>,
    /// Wires that are public: the constant 1 and the public signals.
    public_wires: usize,
    domain: Radix2EvaluationDomain<Fr>,
    /// The constraint domain's FFTs.
    fft: Fft,
    /// The doubled domain's generator: the coset H is evaluated on.
    coset: Fr,
}

impl core::fmt::Debug for CircomProver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CircomProver")
            .field("wires", &self.a.len())
            .field("public_wires", &self.public_wires)
            .field("constraints", &self.a_rows.len())
            .field("table_bytes", &self.table_bytes())
            .finish_non_exhaustive()
    }
}

/// The bytes of table `i` of `pk`'s five (A, B in G1, B in G2, H, L) under `config`.
fn table_bytes(pk: &ProvingKey<Bn254>, i: usize, config: MsmConfig) -> Result<usize, ProverError> {
    match i {
        0 => FixedBaseMsm::table_bytes_for(&pk.a_query, config),
        1 => FixedBaseMsm::table_bytes_for(&pk.b_g1_query, config),
        2 => FixedBaseMsm::table_bytes_for(&pk.b_g2_query, config),
        3 => FixedBaseMsm::table_bytes_for(&pk.h_query, config),
        _ => FixedBaseMsm::table_bytes_for(&pk.l_query, config),
    }
}

/// The windows of `pk`'s A, B (G1), B (G2), H and L tables: each the fastest for its number
/// of bases that are not the identity, then, while the five exceed the budget, the largest
/// table keeps its shifts every one more window (fewer points per base for one more bucket set
/// to reduce: far cheaper in work than widening the window, which doubles the buckets for a few
/// points less). A budget of 0 keeps no shifts: each table is its bases.
fn table_configs(
    pk: &ProvingKey<Bn254>,
    config: &ProverConfig,
) -> Result<([MsmConfig; 5], usize), ProverError> {
    let bases = [
        finite_bases(&pk.a_query),
        finite_bases(&pk.b_g1_query),
        finite_bases(&pk.b_g2_query),
        finite_bases(&pk.h_query),
        finite_bases(&pk.l_query),
    ];
    let bytes = |i: usize, c: MsmConfig| table_bytes(pk, i, c);
    // A budget of 0 takes the bases alone, whatever they take.
    let mut configs = if config.table_budget_bytes == 0 {
        bases.map(|n| MsmConfig::bases_only(n, config.arithmetic))
    } else {
        bases.map(|n| MsmConfig::for_bases_with(n, config.arithmetic))
    };
    loop {
        let mut sizes = [0_usize; 5];
        for (i, size) in sizes.iter_mut().enumerate() {
            *size = bytes(i, configs[i])?;
        }
        let total = sizes.iter().sum::<usize>();
        if config.table_budget_bytes == 0 || total <= config.table_budget_bytes {
            return Ok((configs, total));
        }
        // The largest table that can still shrink, to its next smaller size.
        let mut shrink = None;
        for i in (0..5).filter(|&i| sizes[i] > 0) {
            let windows = configs[i].table_windows();
            let mut next = configs[i];
            while next.shift_every < windows {
                next.shift_every += 1;
                if bytes(i, next)? < sizes[i] {
                    if shrink.is_none_or(|(j, _)| sizes[i] > sizes[j]) {
                        shrink = Some((i, next));
                    }
                    break;
                }
            }
        }
        let Some((i, next)) = shrink else {
            return Err(ProverError::TableBudget {
                needed: total,
                budget: config.table_budget_bytes,
            });
        };
        configs[i] = next;
    }
}

impl CircomProver {
    /// The bytes the tables for `pk` under `config` will take, computed without building them:
    /// a budget too small is refused here, at once, not when the tables are built.
    ///
    /// # Errors
    /// [`ProverError::TableBudget`] when even a table of the bases alone exceeds the budget.
    pub fn table_bytes_for(
        pk: &ProvingKey<Bn254>,
        config: &ProverConfig,
    ) -> Result<usize, ProverError> {
        table_configs(pk, config).map(|(_, bytes)| bytes)
    }

    /// Builds the tables for `pk`, whose circuit has the constraint rows `a_rows` and `b_rows`
    /// (circom keys carry no C rows) and `public_wires` public wires (the constant 1 included).
    ///
    /// # Errors
    /// [`ProverError::KeyShape`] when the key's queries, the rows and the wire counts disagree
    /// (or a row names a wire that does not exist); the table errors of [`FixedBaseMsm::new`].
    pub fn new(
        pk: &ProvingKey<Bn254>,
        a_rows: &[Row],
        b_rows: &[Row],
        public_wires: usize,
    ) -> Result<Self, ProverError> {
        Self::with_config(pk, a_rows, b_rows, public_wires, &ProverConfig::default())
    }

    /// [`new`](Self::new) with the tables fitted to `config`'s budget and arithmetic.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`ProverError::TableBudget`] when even the widest windows
    /// exceed the budget.
    pub fn with_config(
        pk: &ProvingKey<Bn254>,
        a_rows: &[Row],
        b_rows: &[Row],
        public_wires: usize,
        config: &ProverConfig,
    ) -> Result<Self, ProverError> {
        let wires = pk.a_query.len();
        let shape = |what: &str| ProverError::KeyShape(what.to_owned());
        if pk.b_g1_query.len() != wires || pk.b_g2_query.len() != wires {
            return Err(shape("A and B queries of different lengths"));
        }
        if public_wires == 0 || pk.l_query.len() + public_wires != wires {
            return Err(shape("L query does not cover exactly the private wires"));
        }
        if a_rows.len() != b_rows.len() {
            return Err(shape("A and B have different numbers of constraints"));
        }
        if a_rows
            .iter()
            .chain(b_rows)
            .flatten()
            .any(|&(_, wire)| wire >= wires)
        {
            return Err(shape("a constraint names a wire the key does not have"));
        }
        let domain = Radix2EvaluationDomain::<Fr>::new(a_rows.len() + public_wires)
            .ok_or_else(|| shape("too many constraints for BN254's FFT domain"))?;
        let coset = Radix2EvaluationDomain::<Fr>::new(2 * domain.size())
            .ok_or_else(|| shape("too many constraints for BN254's FFT domain"))?
            .element(1);
        if pk.h_query.len() != domain.size() {
            return Err(shape("H query is not the size of the constraint domain"));
        }
        // A budget of 0: no shifts, the bases alone (a Pippenger MSM over each query).
        let ([a, b_g1, b_g2, h, l], _) = table_configs(pk, config)?;
        let (a, b_g1, b_g2, h, l) = (
            FixedBaseMsm::new(&pk.a_query, a)?,
            FixedBaseMsm::new(&pk.b_g1_query, b_g1)?,
            FixedBaseMsm::new(&pk.b_g2_query, b_g2)?,
            FixedBaseMsm::new(&pk.h_query, h)?,
            FixedBaseMsm::new(&pk.l_query, l)?,
        );
        Ok(Self {
            alpha_g1: pk.vk.alpha_g1,
            beta_g1: pk.beta_g1,
            beta_g2: pk.vk.beta_g2,
            delta_g1: pk.delta_g1,
            delta_g2: pk.vk.delta_g2,
            a,
            b_g1,
            b_g2,
            h,
            l,
            a_rows: a_rows.to_vec(),
            b_rows: b_rows.to_vec(),
            public_wires,
            fft: Fft::new(&domain),
            domain,
            coset,
        })
    }

    /// Heap bytes of the five tables.
    #[must_use]
    pub fn table_bytes(&self) -> usize {
        self.a.table_bytes()
            + self.b_g1.table_bytes()
            + self.b_g2.table_bytes()
            + self.h.table_bytes()
            + self.l.table_bytes()
    }

    /// Number of wires (the length of a full assignment).
    #[must_use]
    pub fn wires(&self) -> usize {
        self.a.len()
    }

    /// A proof for the full assignment `z` (wire 0 = 1, then the public signals, then the
    /// private ones), blinded with fresh `r`, `s` from `rng`.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for an assignment of the wrong length.
    pub fn prove<R: RngCore + CryptoRng>(
        &self,
        z: &[Fr],
        rng: &mut R,
    ) -> Result<Proof<Bn254>, ProverError> {
        self.finish(&PartialProof::default(), z, rng)
    }

    /// The sums over the wires already known (`Some`), to be [`finish`](Self::finish)ed for
    /// many assignments that share them: for RLN, what a member's secret and Merkle path fix,
    /// so that each message only pays for the wires its signal and epoch change.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] unless `known` has one entry per wire.
    pub fn partial(&self, known: &[Option<Fr>]) -> Result<PartialProof, ProverError> {
        self.check_wires(known.len())?;
        let z = Zeroizing::new(
            known
                .iter()
                .map(|v| v.unwrap_or_default())
                .collect::<Vec<Fr>>(),
        );
        Ok(PartialProof {
            a: self.a.msm(&z)?,
            b_g1: self.b_g1.msm(&z)?,
            b_g2: self.b_g2.msm(&z)?,
            l: self.l.msm(&z[self.public_wires..])?,
            known: known.to_vec(),
            unchecked: false,
        })
    }

    /// A proof for the full assignment `z` from `partial`'s sums: only the wires `partial` did
    /// not know are multiplied now (the known ones are zero scalars, which cost nothing), plus H.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for an assignment of the wrong length;
    /// [`ProverError::PartialMismatch`] if `z` disagrees with a wire `partial` knew (a member's
    /// path that changed since, say): such a proof would not verify.
    pub fn finish<R: RngCore + CryptoRng>(
        &self,
        partial: &PartialProof,
        z: &[Fr],
        rng: &mut R,
    ) -> Result<Proof<Bn254>, ProverError> {
        // Everything derived from the assignment is zeroized when dropped.
        let h = Zeroizing::new(self.quotient(z)?);
        let rest: Zeroizing<Vec<Fr>> = Zeroizing::new(if partial.known.is_empty() {
            z.to_vec()
        } else {
            if partial.known.len() != z.len() {
                return Err(ProverError::ScalarCount {
                    expected: partial.known.len(),
                    got: z.len(),
                });
            }
            z.iter()
                .zip(&partial.known)
                .enumerate()
                .map(|(wire, (value, known))| match known {
                    None => Ok(*value),
                    Some(_) if partial.unchecked => Ok(Fr::zero()),
                    Some(k) if k == value => Ok(Fr::zero()),
                    Some(_) => Err(ProverError::PartialMismatch { wire }),
                })
                .collect::<Result<_, _>>()?
        });
        let (r, s) = (Fr::rand(rng), Fr::rand(rng));
        let g_a = partial.a + self.a.msm(&rest)? + self.alpha_g1 + self.delta_g1 * r;
        let g1_b = partial.b_g1 + self.b_g1.msm(&rest)? + self.beta_g1 + self.delta_g1 * s;
        let g2_b: G2Projective =
            partial.b_g2 + self.b_g2.msm(&rest)? + self.beta_g2 + self.delta_g2 * s;
        let g_c: G1Projective = partial.l
            + self.l.msm(&rest[self.public_wires..])?
            + self.h.msm(&h)?
            + g_a * s
            + g1_b * r
            - self.delta_g1 * (r * s);
        Ok(Proof {
            a: g_a.into_affine(),
            b: g2_b.into_affine(),
            c: g_c.into_affine(),
        })
    }

    /// `partial` in zerokit's form ([`PartialParts`]): the key's constant terms folded in and
    /// a mask in place of the values, which is what zerokit serializes.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for a partial of another circuit.
    pub fn partial_parts(&self, partial: &PartialProof) -> Result<PartialParts, ProverError> {
        let wires = self.wires();
        // `Default` knows nothing (and has no entries); otherwise one entry per wire.
        let mask = if partial.known.is_empty() {
            vec![false; wires.saturating_sub(1)]
        } else {
            self.check_wires(partial.known.len())?;
            partial.known[1..].iter().map(Option::is_some).collect()
        };
        // zerokit's sums always hold wire 0 (the constant 1) once. Ours hold it when the
        // partial knew it as 1 (`partial` of a witness graph's assignment always does); only
        // otherwise are its bases added, by a one-scalar MSM.
        let missing = Fr::from(1u8) - partial.known.first().copied().flatten().unwrap_or_default();
        let (a0, b0, b0_g2) = if missing.is_zero() {
            Default::default()
        } else {
            let mut one = vec![Fr::zero(); wires];
            one[0] = missing;
            (
                self.a.msm(&one)?,
                self.b_g1.msm(&one)?,
                self.b_g2.msm(&one)?,
            )
        };
        Ok(PartialParts {
            mask,
            pi_a: partial.a + a0 + self.alpha_g1,
            rho: partial.b_g1 + b0 + self.beta_g1,
            pi_b: partial.b_g2 + b0_g2 + self.beta_g2,
            pi_c: partial.l,
        })
    }

    /// The partial proof zerokit's form describes, for [`finish`](Self::finish). It carries no
    /// wire values, so `finish` cannot check the assignment against it (as zerokit does not):
    /// a partial of another member or path gives a proof that does not verify.
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for a mask of another circuit's length.
    pub fn partial_from_parts(&self, parts: &PartialParts) -> Result<PartialProof, ProverError> {
        self.check_wires(parts.mask.len() + 1)?;
        let mut known = Vec::with_capacity(parts.mask.len() + 1);
        known.push(Some(Fr::from(1u8)));
        known.extend(parts.mask.iter().map(|&m| m.then(Fr::zero)));
        Ok(PartialProof {
            known,
            unchecked: true,
            a: parts.pi_a - self.alpha_g1,
            b_g1: parts.rho - self.beta_g1,
            b_g2: parts.pi_b - self.beta_g2,
            l: parts.pi_c,
        })
    }

    /// Refuses an assignment that is not one value per wire.
    fn check_wires(&self, len: usize) -> Result<(), ProverError> {
        if len == self.wires() {
            Ok(())
        } else {
            Err(ProverError::ScalarCount {
                expected: self.wires(),
                got: len,
            })
        }
    }

    /// H's coefficients against the key's H query, computed as snarkjs does (public for
    /// benchmarks that time the FFTs apart from the MSMs).
    ///
    /// # Errors
    /// [`ProverError::ScalarCount`] for an assignment of the wrong length.
    pub fn quotient(&self, z: &[Fr]) -> Result<Vec<Fr>, ProverError> {
        self.check_wires(z.len())?;
        let n = self.domain.size();
        let eval = |row: &Row| row.iter().map(|&(c, w)| c * z[w]).sum::<Fr>();
        let mut a = Zeroizing::new(vec![Fr::zero(); n]);
        let mut b = Zeroizing::new(vec![Fr::zero(); n]);
        let m = self.a_rows.len();
        for (k, (ra, rb)) in self.a_rows.iter().zip(&self.b_rows).enumerate() {
            a[k] = eval(ra);
            b[k] = eval(rb);
        }
        // The public inputs as extra A rows (B zero there), as circom's setup lays them out.
        a[m..m + self.public_wires].copy_from_slice(&z[..self.public_wires]);
        let mut c = Zeroizing::new(
            a.iter()
                .zip(b.iter())
                .map(|(x, y)| *x * y)
                .collect::<Vec<Fr>>(),
        );
        for v in [&mut *a, &mut *b, &mut *c] {
            self.fft.inverse_then_shift(v, self.coset);
            self.fft.forward(v);
        }
        Ok(a.iter()
            .zip(b.iter())
            .zip(c.iter())
            .map(|((x, y), w)| *x * y - w)
            .collect())
    }
}

/// A proof's sums over the wires known in advance ([`CircomProver::partial`]); `Default` knows
/// nothing. The known wire values (for RLN, derived from the member's secret) are zeroized when
/// it is dropped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartialProof {
    known: Vec<Option<Fr>>,
    /// Whether `known` holds the values (checked against each assignment) or only marks the
    /// wires (a partial rebuilt from [`PartialParts`], which carry no values).
    unchecked: bool,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
    l: G1Projective,
}

impl Drop for PartialProof {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.known);
    }
}

/// A partial proof as zerokit's `PartialProof` holds and serializes it: which wires after the
/// constant were known (`mask`), and the sums with the key's constant terms folded in.
#[derive(Clone, Debug, PartialEq)]
pub struct PartialParts {
    /// One entry per wire after wire 0: whether the partial knew it.
    pub mask: Vec<bool>,
    /// α + A₀ + Σ known zⱼ·Aⱼ (G1).
    pub pi_a: G1Projective,
    /// β + B₀ + Σ known zⱼ·Bⱼ (G1).
    pub rho: G1Projective,
    /// β + B₀ + Σ known zⱼ·Bⱼ (G2).
    pub pi_b: G2Projective,
    /// Σ known private zⱼ·Lⱼ.
    pub pi_c: G1Projective,
}
