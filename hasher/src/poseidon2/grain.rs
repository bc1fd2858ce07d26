//! The Grain LFSR of the Poseidon papers: the generator every Poseidon and Poseidon2 parameter
//! script draws its round constants from, so the constants are derived here from the instance's
//! shape rather than pasted.
//!
//! The 80-bit register is seeded with the instance (field kind, S-box kind, field size, width,
//! full and partial rounds, then thirty ones), clocked 160 times, and thereafter read in pairs:
//! a pair whose first bit is 1 yields its second bit, any other pair is discarded. A field
//! element is the next `n` bits read big-endian, drawn again while it is not below the modulus.

use ark_ff::{BigInteger, PrimeField};

/// The generator's state: 80 bits, oldest first.
pub(crate) struct Grain {
    bits: [bool; 80],
    /// Where the oldest bit is (the register is a ring).
    head: usize,
}

/// What the parameter scripts put in the register's first six fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Instance {
    /// Field kind: 1 for a prime field.
    pub field: u64,
    /// S-box kind: 0 for `x^α` with positive `α`.
    pub sbox: u64,
    /// Bits of the field's modulus.
    pub field_bits: u64,
    /// The state's width `t`.
    pub width: u64,
    /// Full rounds.
    pub full_rounds: u64,
    /// Partial rounds.
    pub partial_rounds: u64,
}

impl Grain {
    pub(crate) fn new(instance: Instance) -> Self {
        let mut seed = Vec::with_capacity(80);
        let mut push = |value: u64, width: u32| {
            for i in (0..width).rev() {
                seed.push((value >> i) & 1 == 1);
            }
        };
        push(instance.field, 2);
        push(instance.sbox, 4);
        push(instance.field_bits, 12);
        push(instance.width, 12);
        push(instance.full_rounds, 10);
        push(instance.partial_rounds, 10);
        push((1 << 30) - 1, 30);
        let mut bits = [false; 80];
        bits.copy_from_slice(&seed);
        let mut grain = Self { bits, head: 0 };
        for _ in 0..160 {
            grain.clock();
        }
        grain
    }

    /// One step of the register: the new bit is the feedback of taps 0, 13, 23, 38, 51 and 62.
    fn clock(&mut self) -> bool {
        let at = |i: usize| self.bits[(self.head + i) % 80];
        let new = at(0) ^ at(13) ^ at(23) ^ at(38) ^ at(51) ^ at(62);
        self.bits[self.head] = new;
        self.head = (self.head + 1) % 80;
        new
    }

    /// The next output bit (pairs with a leading 0 discarded).
    fn next_bit(&mut self) -> bool {
        loop {
            let keep = self.clock();
            let bit = self.clock();
            if keep {
                return bit;
            }
        }
    }

    /// The next field element: `field_bits` bits big-endian, redrawn until below the modulus.
    pub(crate) fn next_field<F: PrimeField>(&mut self, field_bits: u64) -> F {
        loop {
            let be: Vec<bool> = (0..field_bits).map(|_| self.next_bit()).collect();
            let bigint = F::BigInt::from_bits_be(&be);
            if let Some(x) = F::from_bigint(bigint) {
                return x;
            }
        }
    }
}
