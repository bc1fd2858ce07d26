//! The newest WakuRlnV2's root history: the last [`HISTORY_SIZE`] roots it stored, one per
//! tree-changing call (`RootStored`), served by `getRecentRoots()` and `getRootAt(uint8)`.
//! Canopy keeps the same list in every block's metadata, so it lands and rewinds with the block.

use hasher::Fr;

/// Roots the contract keeps (its `HISTORY_SIZE` constant).
pub const HISTORY_SIZE: usize = 5;

/// The contract's recent roots, newest first: exactly what its ring buffer holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RootHistory {
    roots: [Fr; HISTORY_SIZE],
    len: u8,
}

/// Why `getRootAt(position)` reverts, with the contract's own reason strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RootAtError {
    /// `position >= HISTORY_SIZE`.
    #[error("Out of range")]
    OutOfRange,
    /// No root stored yet.
    #[error("No roots yet")]
    NoRootsYet,
}

impl RootHistory {
    /// The roots, newest first (at most [`HISTORY_SIZE`]; more are ignored).
    #[must_use]
    pub fn from_newest_first(roots: &[Fr]) -> Self {
        let mut history = Self::default();
        for (slot, root) in history.roots.iter_mut().zip(roots) {
            *slot = *root;
            history.len += 1;
        }
        history
    }

    /// Seeds from `getRecentRoots()`: the ring is filled in order, so the stored roots are the
    /// leading non-zero words (a zero root cannot be stored: it is no Poseidon output anyone
    /// can find).
    #[must_use]
    pub fn from_recent_roots(words: &[Fr; HISTORY_SIZE]) -> Self {
        let stored = words.iter().take_while(|r| **r != Fr::from(0u64)).count();
        Self::from_newest_first(&words[..stored])
    }

    /// A root the contract stored (a `RootStored` event): it becomes the newest, the oldest
    /// falls out once the ring is full.
    pub fn push(&mut self, root: Fr) {
        self.roots.copy_within(..HISTORY_SIZE - 1, 1);
        self.roots[0] = root;
        if usize::from(self.len) < HISTORY_SIZE {
            self.len += 1;
        }
    }

    /// How many roots are stored (at most [`HISTORY_SIZE`]).
    #[must_use]
    pub fn len(&self) -> u8 {
        self.len
    }

    /// No root stored yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stored roots, newest first.
    #[must_use]
    pub fn roots(&self) -> &[Fr] {
        &self.roots[..usize::from(self.len)]
    }

    /// The newest stored root.
    #[must_use]
    pub fn newest(&self) -> Option<Fr> {
        self.roots().first().copied()
    }

    /// `getRecentRoots()`: the roots newest first, zero-padded to [`HISTORY_SIZE`].
    #[must_use]
    pub fn recent_roots(&self) -> [Fr; HISTORY_SIZE] {
        self.roots
    }

    /// `getRootAt(position)`: 0 for a slot never written, as the contract's ring.
    ///
    /// # Errors
    /// The contract's reverts, in its order of checks.
    pub fn root_at(&self, position: u8) -> Result<Fr, RootAtError> {
        if usize::from(position) >= HISTORY_SIZE {
            return Err(RootAtError::OutOfRange);
        }
        if self.len == 0 {
            return Err(RootAtError::NoRootsYet);
        }
        Ok(self.roots[usize::from(position)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_five_newest_first() {
        let mut history = RootHistory::default();
        assert_eq!(history.root_at(0), Err(RootAtError::NoRootsYet));
        assert_eq!(history.root_at(5), Err(RootAtError::OutOfRange));
        for r in 1..=7u64 {
            history.push(Fr::from(r));
        }
        let want: Vec<Fr> = (3..=7u64).rev().map(Fr::from).collect();
        assert_eq!(history.roots(), want.as_slice());
        assert_eq!(history.root_at(4), Ok(Fr::from(3u64)));
        // A duplicate is stored again, as the contract does.
        history.push(Fr::from(7u64));
        assert_eq!(history.roots()[..2], [Fr::from(7u64), Fr::from(7u64)]);
    }

    #[test]
    fn seeding_from_get_recent_roots_keeps_the_zero_padding() {
        let words = [2u64, 1, 0, 0, 0].map(Fr::from);
        let history = RootHistory::from_recent_roots(&words);
        assert_eq!(history.roots(), &words[..2]);
        assert_eq!(history.recent_roots(), words);
        assert_eq!(history.root_at(3), Ok(Fr::from(0u64)));
        assert_eq!(
            RootHistory::from_recent_roots(&[Fr::from(0u64); 5]).root_at(0),
            Err(RootAtError::NoRootsYet)
        );
    }
}
