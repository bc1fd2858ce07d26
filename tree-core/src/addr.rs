//! Tree geometry: validated depth and node addresses (level 0 = leaves).

use crate::TreeError;

/// Deepest tree any Canopy tree accepts: indices are `u64`, so capacity `2^63` still fits.
pub const MAX_DEPTH: u8 = 63;

/// A validated tree depth (number of levels above the leaves), `1..=MAX_DEPTH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "u8", into = "u8"))]
pub struct Depth(u8);

impl Depth {
    /// Validates `depth`.
    ///
    /// # Errors
    /// [`TreeError::InvalidDepth`] for 0 or anything above [`MAX_DEPTH`].
    pub fn new(depth: u8) -> Result<Self, TreeError> {
        if depth == 0 || depth > MAX_DEPTH {
            return Err(TreeError::InvalidDepth {
                depth: u64::from(depth),
                max: MAX_DEPTH,
            });
        }
        Ok(Self(depth))
    }

    /// Validates a depth given as any integer (for callers holding a `usize`).
    ///
    /// # Errors
    /// [`TreeError::InvalidDepth`] as [`Depth::new`].
    pub fn from_usize(depth: usize) -> Result<Self, TreeError> {
        let wide = u64::try_from(depth).unwrap_or(u64::MAX);
        u8::try_from(depth)
            .map_err(|_| TreeError::InvalidDepth {
                depth: wide,
                max: MAX_DEPTH,
            })
            .and_then(Self::new)
    }

    /// The depth as a number.
    #[must_use]
    pub fn get(self) -> u8 {
        self.0
    }

    /// Number of leaves, `2^depth` (cannot overflow: depth ≤ 63).
    #[must_use]
    pub fn capacity(self) -> u64 {
        1u64 << self.0
    }

    /// Number of nodes at `level` (`capacity >> level`); 0 above the root.
    #[must_use]
    pub fn width(self, level: u8) -> u64 {
        if level > self.0 {
            0
        } else {
            self.capacity() >> level
        }
    }

    /// Checks that `index` is a leaf of this tree.
    ///
    /// # Errors
    /// [`TreeError::IndexOutOfBounds`] when `index >= capacity`.
    pub fn check_index(self, index: u64) -> Result<(), TreeError> {
        if index >= self.capacity() {
            return Err(TreeError::IndexOutOfBounds {
                index,
                capacity: self.capacity(),
            });
        }
        Ok(())
    }

    /// Checks that `addr` names a node of this tree.
    ///
    /// # Errors
    /// [`TreeError::LevelOutOfBounds`] above the root, [`TreeError::NodeOutOfBounds`] for an index
    /// past the level's width.
    pub fn check_addr(self, addr: NodeAddr) -> Result<(), TreeError> {
        if addr.level > self.0 {
            return Err(TreeError::LevelOutOfBounds {
                level: addr.level,
                depth: self.0,
            });
        }
        let width = self.width(addr.level);
        if addr.index >= width {
            return Err(TreeError::NodeOutOfBounds {
                level: addr.level,
                index: addr.index,
                width,
            });
        }
        Ok(())
    }
}

impl TryFrom<u8> for Depth {
    type Error = TreeError;
    fn try_from(depth: u8) -> Result<Self, TreeError> {
        Self::new(depth)
    }
}

impl From<Depth> for u8 {
    fn from(depth: Depth) -> u8 {
        depth.0
    }
}

impl core::fmt::Display for Depth {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// A node's position: `level` counted from the leaves (0) up, `index` from the left at that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddr {
    /// Height above the leaves (0 = leaf, depth = root).
    pub level: u8,
    /// Position within the level, from the left.
    pub index: u64,
}

impl NodeAddr {
    /// The leaf at `index`.
    #[must_use]
    pub fn leaf(index: u64) -> Self {
        Self { level: 0, index }
    }

    /// The root of a tree of `depth`.
    #[must_use]
    pub fn root(depth: Depth) -> Self {
        Self {
            level: depth.get(),
            index: 0,
        }
    }

    /// The nodes a membership proof of leaf `index` holds, bottom-up: at each level below the
    /// root, the sibling of the node on the leaf's path. Every tree's `proof` walks this.
    pub fn proof_path(depth: Depth, index: u64) -> impl Iterator<Item = Self> {
        (0..depth.get()).map(move |level| {
            Self {
                level,
                index: index >> level,
            }
            .sibling()
        })
    }

    /// The node one level up that covers this one.
    #[must_use]
    pub fn parent(self) -> Self {
        Self {
            level: self.level + 1,
            index: self.index >> 1,
        }
    }

    /// The other child of this node's parent.
    #[must_use]
    pub fn sibling(self) -> Self {
        Self {
            level: self.level,
            index: self.index ^ 1,
        }
    }

    /// The left and right children (`None` at the leaves).
    #[must_use]
    pub fn children(self) -> Option<(Self, Self)> {
        let level = self.level.checked_sub(1)?;
        let left = self.index.checked_mul(2)?;
        Some((
            Self { level, index: left },
            Self {
                level,
                index: left | 1,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_bounds() {
        assert!(Depth::new(0).is_err());
        assert_eq!(Depth::new(63).unwrap().capacity(), 1 << 63);
        assert_eq!(
            Depth::new(64),
            Err(TreeError::InvalidDepth { depth: 64, max: 63 })
        );
        assert_eq!(
            Depth::from_usize(300),
            Err(TreeError::InvalidDepth {
                depth: 300,
                max: 63
            })
        );
    }

    #[test]
    fn addr_math() {
        let a = NodeAddr { level: 2, index: 5 };
        assert_eq!(a.parent(), NodeAddr { level: 3, index: 2 });
        assert_eq!(a.sibling(), NodeAddr { level: 2, index: 4 });
        let (l, r) = a.children().unwrap();
        assert_eq!((l.index, r.index, l.level), (10, 11, 1));
        assert!(NodeAddr::leaf(3).children().is_none());
        let depth = Depth::new(3).unwrap();
        assert_eq!(NodeAddr::root(depth), NodeAddr { level: 3, index: 0 });
        let path: Vec<NodeAddr> = NodeAddr::proof_path(depth, 5).collect();
        assert_eq!(
            path,
            [
                NodeAddr { level: 0, index: 4 },
                NodeAddr { level: 1, index: 3 },
                NodeAddr { level: 2, index: 0 },
            ]
        );
        let d = Depth::new(3).unwrap();
        assert!(d.check_addr(NodeAddr { level: 3, index: 0 }).is_ok());
        assert!(d.check_addr(NodeAddr { level: 3, index: 1 }).is_err());
        assert!(d.check_addr(NodeAddr { level: 4, index: 0 }).is_err());
    }
}
