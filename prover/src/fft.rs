//! Radix-2 FFTs of one size over `Fr`, with their twiddles computed once per prover.
//!
//! ark-poly's `Radix2EvaluationDomain` recomputes its roots on every call and runs its
//! butterflies through rayon's chunked iterators, which on one thread cost about a third more
//! than the products themselves at the sizes of a circom proof (8192 for RLN: 2.6 ms a forward
//! FFT against 1.8 ms here, AMD EPYC). A proof takes six, so the quotient keeps its own.

use ark_bn254::Fr;
use ark_ff::One;
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};

/// The FFTs of a domain of `2^log_n` points.
#[derive(Clone, Debug)]
pub(crate) struct Fft {
    log_n: u32,
    /// `ω^j` for `j < n/2`, `ω` the domain's generator.
    roots: Vec<Fr>,
    /// `1/n`.
    n_inv: Fr,
}

impl Fft {
    /// The FFTs of `domain`.
    pub(crate) fn new(domain: &Radix2EvaluationDomain<Fr>) -> Self {
        let n = domain.size();
        let mut roots = Vec::with_capacity(n / 2);
        let mut w = Fr::one();
        for _ in 0..n / 2 {
            roots.push(w);
            w *= domain.group_gen();
        }
        Self {
            log_n: n.trailing_zeros(),
            roots,
            n_inv: domain.size_inv(),
        }
    }

    /// The evaluations of the polynomial with coefficients `v` at `ω^0, ω^1, …`, in place.
    pub(crate) fn forward(&self, v: &mut [Fr]) {
        let n = v.len();
        debug_assert_eq!(n, 1 << self.log_n);
        // Decimation in time: the inputs in bit-reversed order, then log n stages.
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - self.log_n);
            if i < j {
                v.swap(i, j);
            }
        }
        let mut half = 1;
        while half < n {
            let stride = n / (2 * half);
            for block in v.chunks_exact_mut(2 * half) {
                let (low, high) = block.split_at_mut(half);
                for (j, (a, b)) in low.iter_mut().zip(high.iter_mut()).enumerate() {
                    let t = self.roots[j * stride] * *b;
                    *b = *a - t;
                    *a += t;
                }
            }
            half *= 2;
        }
    }

    /// The coefficients of the polynomial with evaluations `v` over the domain, each then
    /// multiplied by `shift^i`: what evaluating on the coset `shift·⟨ω⟩` next needs.
    pub(crate) fn inverse_then_shift(&self, v: &mut [Fr], shift: Fr) {
        // The inverse transform is the forward one with the outputs 1..n reversed, over n.
        self.forward(v);
        v[1..].reverse();
        let mut factor = self.n_inv;
        for x in v.iter_mut() {
            *x *= factor;
            factor *= shift;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::UniformRand;

    #[test]
    fn agrees_with_ark_poly() {
        let mut rng = ark_std::test_rng();
        for log_n in [1, 2, 5, 10, 13] {
            let domain = Radix2EvaluationDomain::<Fr>::new(1 << log_n).unwrap();
            let fft = Fft::new(&domain);
            let coefficients: Vec<Fr> = (0..1 << log_n).map(|_| Fr::rand(&mut rng)).collect();
            let mut ours = coefficients.clone();
            fft.forward(&mut ours);
            assert_eq!(ours, domain.fft(&coefficients), "n = 2^{log_n}");
            let shift = Fr::from(7u8);
            fft.inverse_then_shift(&mut ours, shift);
            let shifted: Vec<Fr> = coefficients
                .iter()
                .enumerate()
                .map(|(i, c)| *c * ark_ff::Field::pow(&shift, [i as u64]))
                .collect();
            assert_eq!(ours, shifted, "n = 2^{log_n}");
        }
    }
}
