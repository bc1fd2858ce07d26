//! circom witness computation from an iden3 witness graph (`graph.bin`, the format of iden3's
//! circom-witnesscalc that rln 3.0.0 ships for its circuit): the circuit's signal computations
//! as a flat list of field operations, evaluated in order.
//!
//! rln 3.0.0 evaluates its `graph.bin` with a crate-private calculator, so a prover of our own
//! reads the same file here. Every node reference is checked at load time to point backwards,
//! every constant to be canonical, and every input slot and output to exist, so evaluation
//! cannot index out of bounds; a malformed file is a [`WitnessError`], never a panic.

use std::collections::BTreeMap;

use ark_bn254::Fr;
use ark_ff::{BigInteger, Field, One, PrimeField, Zero};
use prost::Message;

/// The file's first bytes.
pub const GRAPH_MAGIC: &[u8] = b"wtns.graph.001";

/// Why a graph or its inputs were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    /// Not a witness graph, or truncated.
    #[error("malformed witness graph: {0}")]
    Malformed(String),
    /// A node that refers to itself or a later node, or to an input slot that does not exist.
    #[error("node {node} refers to {target}, which is not an earlier node or an input slot")]
    BadReference {
        /// The node's position.
        node: usize,
        /// What it refers to.
        target: u32,
    },
    /// An input the graph does not have.
    #[error("the circuit has no input {0:?}")]
    UnknownInput(String),
    /// An input given with the wrong number of values.
    #[error("input {name:?} takes {expected} values, got {got}")]
    InputLength {
        /// The input's name.
        name: String,
        /// Values the circuit takes.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// An input the caller did not give.
    #[error("input {0:?} is missing")]
    MissingInput(String),
}

/// The file's protobuf messages (iden3 circom-witnesscalc's `messages.proto`): after the magic
/// and a little-endian `u64` node count, that many length-delimited [`proto::Node`]s, then one
/// length-delimited [`proto::GraphMetadata`]. Public so tools and fuzzers can write graphs.
#[allow(missing_docs)] // field-for-field the .proto file's messages
pub mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BigUInt {
        #[prost(bytes = "vec", tag = "1")]
        pub value_le: Vec<u8>,
    }
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct InputNode {
        #[prost(uint32, tag = "1")]
        pub idx: u32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ConstantNode {
        #[prost(message, optional, tag = "1")]
        pub value: Option<BigUInt>,
    }
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct UnoOpNode {
        #[prost(int32, tag = "1")]
        pub op: i32,
        #[prost(uint32, tag = "2")]
        pub a_idx: u32,
    }
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct DuoOpNode {
        #[prost(int32, tag = "1")]
        pub op: i32,
        #[prost(uint32, tag = "2")]
        pub a_idx: u32,
        #[prost(uint32, tag = "3")]
        pub b_idx: u32,
    }
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct TresOpNode {
        #[prost(int32, tag = "1")]
        pub op: i32,
        #[prost(uint32, tag = "2")]
        pub a_idx: u32,
        #[prost(uint32, tag = "3")]
        pub b_idx: u32,
        #[prost(uint32, tag = "4")]
        pub c_idx: u32,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(message, tag = "1")]
        Input(InputNode),
        #[prost(message, tag = "2")]
        Constant(ConstantNode),
        #[prost(message, tag = "3")]
        UnoOp(UnoOpNode),
        #[prost(message, tag = "4")]
        DuoOp(DuoOpNode),
        #[prost(message, tag = "5")]
        TresOp(TresOpNode),
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Node {
        #[prost(oneof = "Kind", tags = "1, 2, 3, 4, 5")]
        pub node: Option<Kind>,
    }
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct SignalDescription {
        #[prost(uint32, tag = "1")]
        pub offset: u32,
        #[prost(uint32, tag = "2")]
        pub len: u32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GraphMetadata {
        #[prost(uint32, repeated, tag = "1")]
        pub witness_signals: Vec<u32>,
        #[prost(map = "string, message", tag = "2")]
        pub inputs: std::collections::HashMap<String, SignalDescription>,
    }
}

/// A two-operand operation, numbered as in `messages.proto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DuoOp {
    Mul,
    Div,
    Add,
    Sub,
    Pow,
    Idiv,
    Mod,
    Eq,
    Neq,
    Lt,
    Gt,
    Leq,
    Geq,
    Land,
    Lor,
    Shl,
    Shr,
    Bor,
    Band,
    Bxor,
}

impl DuoOp {
    fn from_proto(op: i32) -> Option<Self> {
        use DuoOp::*;
        const ALL: [DuoOp; 20] = [
            Mul, Div, Add, Sub, Pow, Idiv, Mod, Eq, Neq, Lt, Gt, Leq, Geq, Land, Lor, Shl, Shr,
            Bor, Band, Bxor,
        ];
        ALL.get(usize::try_from(op).ok()?).copied()
    }
}

/// One node of the graph; operands are positions of earlier nodes.
#[derive(Debug, Clone, Copy)]
enum Node {
    Input(u32),
    Constant(Fr),
    Neg(u32),
    Id(u32),
    Duo(DuoOp, u32, u32),
    /// `a != 0 ? b : c`
    Ternary(u32, u32, u32),
}

/// A parsed, validated witness graph over BN254's scalar field (circom's default prime).
#[derive(Debug, Clone)]
pub struct WitnessGraph {
    nodes: Vec<Node>,
    /// The node holding each witness wire, in wire order (wire 0 is the constant 1).
    outputs: Vec<u32>,
    /// Input name → (first slot, number of values).
    inputs: BTreeMap<String, (usize, usize)>,
    /// Input slots, slot 0 being the constant 1.
    slots: usize,
}

fn malformed(what: impl Into<String>) -> WitnessError {
    WitnessError::Malformed(what.into())
}

/// Reads one length-delimited protobuf message from the front of `bytes`.
fn next_message<M: Message + Default>(bytes: &mut &[u8]) -> Result<M, WitnessError> {
    let len = prost::decode_length_delimiter(&mut *bytes)
        .map_err(|e| malformed(format!("message length: {e}")))?;
    if len > bytes.len() {
        return Err(malformed("message runs past the end of the file"));
    }
    let (message, rest) = bytes.split_at(len);
    *bytes = rest;
    M::decode(message).map_err(|e| malformed(format!("message: {e}")))
}

impl WitnessGraph {
    /// Parses and validates a `graph.bin`.
    ///
    /// # Errors
    /// [`WitnessError::Malformed`] for a file that is not a witness graph (bad magic, truncated,
    /// undecodable messages, a non-canonical constant, an unknown operation) and
    /// [`WitnessError::BadReference`] for a node or output that refers where it may not.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WitnessError> {
        let mut rest = bytes
            .strip_prefix(GRAPH_MAGIC)
            .ok_or_else(|| malformed("no wtns.graph.001 magic"))?;
        let (count, after) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| malformed("no node count"))?;
        rest = after;
        let count = usize::try_from(u64::from_le_bytes(*count))
            .map_err(|_| malformed("node count overflows"))?;
        // Every node takes at least two bytes, so a count beyond that is a lie, not a reason to
        // reserve memory.
        let mut nodes = Vec::with_capacity(count.min(rest.len() / 2));
        let mut slots = 1_usize;
        for position in 0..count {
            let message: proto::Node = next_message(&mut rest)?;
            let earlier = |target: u32| {
                if (target as usize) < position {
                    Ok(target)
                } else {
                    Err(WitnessError::BadReference {
                        node: position,
                        target,
                    })
                }
            };
            let node = match message.node {
                None => return Err(malformed(format!("node {position} is empty"))),
                Some(proto::Kind::Input(input)) => {
                    slots = slots.max(input.idx as usize + 1);
                    Node::Input(input.idx)
                }
                Some(proto::Kind::Constant(constant)) => {
                    let bytes = constant.value.map(|v| v.value_le).unwrap_or_default();
                    Node::Constant(canonical(&bytes).ok_or_else(|| {
                        malformed(format!("node {position}: constant is not a field element"))
                    })?)
                }
                Some(proto::Kind::UnoOp(op)) => match op.op {
                    0 => Node::Neg(earlier(op.a_idx)?),
                    1 => Node::Id(earlier(op.a_idx)?),
                    other => return Err(malformed(format!("unknown unary operation {other}"))),
                },
                Some(proto::Kind::DuoOp(op)) => Node::Duo(
                    DuoOp::from_proto(op.op)
                        .ok_or_else(|| malformed(format!("unknown operation {}", op.op)))?,
                    earlier(op.a_idx)?,
                    earlier(op.b_idx)?,
                ),
                Some(proto::Kind::TresOp(op)) => match op.op {
                    0 => Node::Ternary(earlier(op.a_idx)?, earlier(op.b_idx)?, earlier(op.c_idx)?),
                    other => return Err(malformed(format!("unknown ternary operation {other}"))),
                },
            };
            nodes.push(node);
        }
        let metadata: proto::GraphMetadata = next_message(&mut rest)?;
        for &output in &metadata.witness_signals {
            if output as usize >= nodes.len() {
                return Err(WitnessError::BadReference {
                    node: nodes.len(),
                    target: output,
                });
            }
        }
        let mut inputs = BTreeMap::new();
        for (name, signal) in metadata.inputs {
            let (offset, len) = (signal.offset as usize, signal.len as usize);
            if offset == 0 {
                return Err(malformed(format!(
                    "input {name:?} at slot 0 (the constant 1)"
                )));
            }
            slots = slots.max(offset + len);
            inputs.insert(name, (offset, len));
        }
        // A graph reads each input slot through an input node, so more slots than nodes is a
        // lie that would only cost memory.
        if slots > nodes.len() + 1 {
            return Err(malformed(format!(
                "{slots} input slots for {} nodes",
                nodes.len()
            )));
        }
        Ok(Self {
            nodes,
            outputs: metadata.witness_signals,
            inputs,
            slots,
        })
    }

    /// The circuit's inputs: name and number of values, by name.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, usize)> {
        self.inputs
            .iter()
            .map(|(name, &(_, len))| (name.as_str(), len))
    }

    /// Number of witness wires (the constant 1, public signals, then private ones).
    #[must_use]
    pub fn wires(&self) -> usize {
        self.outputs.len()
    }

    /// The full assignment for `inputs` (every input of the circuit, by name): wire 0 is 1,
    /// then the public signals, then the private ones, as the proving key orders them.
    ///
    /// # Errors
    /// [`WitnessError::UnknownInput`], [`WitnessError::InputLength`] or
    /// [`WitnessError::MissingInput`].
    pub fn witness<N: AsRef<str>, V: AsRef<[Fr]>>(
        &self,
        inputs: &[(N, V)],
    ) -> Result<Vec<Fr>, WitnessError> {
        let wires = self.partial_witness(inputs)?;
        if let Some(missing) = self.inputs.keys().find(|name| {
            !inputs
                .iter()
                .any(|(given, _)| given.as_ref() == name.as_str())
        }) {
            return Err(WitnessError::MissingInput(missing.clone()));
        }
        // With every input known, every wire is.
        wires
            .into_iter()
            .map(|v| v.ok_or_else(|| malformed("a wire depends on no input or constant")))
            .collect()
    }

    /// The wires that `inputs` (some of the circuit's inputs) determine, `None` for the others:
    /// what a partial proof can precompute.
    ///
    /// # Errors
    /// [`WitnessError::UnknownInput`] or [`WitnessError::InputLength`].
    pub fn partial_witness<N: AsRef<str>, V: AsRef<[Fr]>>(
        &self,
        inputs: &[(N, V)],
    ) -> Result<Vec<Option<Fr>>, WitnessError> {
        let mut slots = vec![None; self.slots];
        slots[0] = Some(Fr::one());
        for (name, values) in inputs {
            let (name, values) = (name.as_ref(), values.as_ref());
            let &(offset, len) = self
                .inputs
                .get(name)
                .ok_or_else(|| WitnessError::UnknownInput(name.to_owned()))?;
            if values.len() != len {
                return Err(WitnessError::InputLength {
                    name: name.to_owned(),
                    expected: len,
                    got: values.len(),
                });
            }
            for (slot, value) in slots[offset..offset + len].iter_mut().zip(values) {
                *slot = Some(*value);
            }
        }
        let mut values: Vec<Option<Fr>> = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            // Operands were checked to be earlier nodes, input slots to exist.
            let at = |i: u32| values[i as usize];
            let value = match *node {
                Node::Input(slot) => slots[slot as usize],
                Node::Constant(c) => Some(c),
                Node::Neg(a) => at(a).map(|a| -a),
                Node::Id(a) => at(a),
                Node::Duo(op, a, b) => at(a).zip(at(b)).map(|(a, b)| duo(op, a, b)),
                Node::Ternary(a, b, c) => {
                    at(a).and_then(|a| if a.is_zero() { at(c) } else { at(b) })
                }
            };
            values.push(value);
        }
        Ok(self.outputs.iter().map(|&o| values[o as usize]).collect())
    }
}

/// The field element whose canonical little-endian bytes are `bytes`, if they are canonical.
fn canonical(bytes: &[u8]) -> Option<Fr> {
    let mut repr = <Fr as PrimeField>::BigInt::default();
    let limbs = repr.as_mut();
    if bytes.len() > limbs.len() * 8 {
        return None;
    }
    for (i, byte) in bytes.iter().enumerate() {
        limbs[i / 8] |= u64::from(*byte) << (8 * (i % 8));
    }
    Fr::from_bigint(repr)
}

/// circom's relational operators read a value above (p-1)/2 as negative.
fn signed_cmp(a: Fr, b: Fr) -> core::cmp::Ordering {
    let half = Fr::MODULUS_MINUS_ONE_DIV_TWO;
    let (a, b) = (a.into_bigint(), b.into_bigint());
    match (a > half, b > half) {
        (false, true) => core::cmp::Ordering::Greater,
        (true, false) => core::cmp::Ordering::Less,
        _ => a.cmp(&b),
    }
}

/// A bitwise result of two canonical values, reduced once (it is below 2^254 < 2p).
fn bitwise(a: Fr, b: Fr, f: impl Fn(u64, u64) -> u64) -> Fr {
    let (mut x, y) = (a.into_bigint(), b.into_bigint());
    for (l, r) in x.as_mut().iter_mut().zip(y.as_ref()) {
        *l = f(*l, *r);
    }
    if x >= Fr::MODULUS {
        x.sub_with_borrow(&Fr::MODULUS);
    }
    Fr::from_bigint(x).unwrap_or_default()
}

fn from_bool(b: bool) -> Fr {
    if b {
        Fr::one()
    } else {
        Fr::zero()
    }
}

/// A two-operand node's value, with circom's semantics (division by zero gives 0).
fn duo(op: DuoOp, a: Fr, b: Fr) -> Fr {
    use core::cmp::Ordering::{Greater, Less};
    let bits = Fr::MODULUS_BIT_SIZE;
    match op {
        DuoOp::Mul => a * b,
        DuoOp::Div => b.inverse().map_or_else(Fr::zero, |inv| a * inv),
        DuoOp::Add => a + b,
        DuoOp::Sub => a - b,
        DuoOp::Pow => a.pow(b.into_bigint()),
        DuoOp::Idiv | DuoOp::Mod => {
            if b.is_zero() {
                return Fr::zero();
            }
            let (x, y) = (
                num_u256(a.into_bigint().as_ref()),
                num_u256(b.into_bigint().as_ref()),
            );
            let r = if op == DuoOp::Idiv { x / y } else { x % y };
            Fr::from_le_bytes_mod_order(&r.to_le_bytes())
        }
        DuoOp::Eq => from_bool(a == b),
        DuoOp::Neq => from_bool(a != b),
        DuoOp::Lt => from_bool(signed_cmp(a, b) == Less),
        DuoOp::Gt => from_bool(signed_cmp(a, b) == Greater),
        DuoOp::Leq => from_bool(signed_cmp(a, b) != Greater),
        DuoOp::Geq => from_bool(signed_cmp(a, b) != Less),
        DuoOp::Land => from_bool(!a.is_zero() && !b.is_zero()),
        DuoOp::Lor => from_bool(!a.is_zero() || !b.is_zero()),
        DuoOp::Shl | DuoOp::Shr => {
            let shift = b.into_bigint();
            let small = shift.as_ref()[1..].iter().all(|l| *l == 0);
            let n = shift.as_ref()[0];
            if n == 0 && small {
                return a;
            }
            if !small || n >= u64::from(bits) {
                return Fr::zero();
            }
            if op == DuoOp::Shl {
                // (a · 2^n) mod p
                a * Fr::from(2u64).pow([n])
            } else {
                // n < 254 here, so the conversion holds; a shifted canonical value stays one.
                let x = a.into_bigint() >> u32::try_from(n).unwrap_or(0);
                Fr::from_bigint(x).unwrap_or_default()
            }
        }
        DuoOp::Bor => bitwise(a, b, |x, y| x | y),
        DuoOp::Band => bitwise(a, b, |x, y| x & y),
        DuoOp::Bxor => bitwise(a, b, |x, y| x ^ y),
    }
}

/// A canonical value's little-endian limbs as a 256-bit integer.
fn num_u256(limbs: &[u64]) -> U256 {
    let mut out = [0u64; 4];
    for (o, l) in out.iter_mut().zip(limbs) {
        *o = *l;
    }
    U256(out)
}

/// A 256-bit unsigned integer, just enough for circom's `\` and `%` on field elements.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct U256([u64; 4]);

impl U256 {
    fn bit(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }

    fn shl1(&mut self, bit: bool) {
        let mut carry = u64::from(bit);
        for limb in &mut self.0 {
            let next = *limb >> 63;
            *limb = *limb << 1 | carry;
            carry = next;
        }
    }

    fn ge(&self, other: &Self) -> bool {
        self.0.iter().rev().cmp(other.0.iter().rev()) != core::cmp::Ordering::Less
    }

    fn sub(&mut self, other: &Self) {
        let mut borrow = false;
        for (l, r) in self.0.iter_mut().zip(other.0) {
            let (d, b1) = l.overflowing_sub(r);
            let (d, b2) = d.overflowing_sub(u64::from(borrow));
            *l = d;
            borrow = b1 || b2;
        }
    }

    /// Quotient and remainder by binary long division (divisor nonzero).
    fn div_rem(self, divisor: Self) -> (Self, Self) {
        let (mut q, mut r) = (U256([0; 4]), U256([0; 4]));
        for i in (0..256).rev() {
            r.shl1(self.bit(i));
            q.shl1(false);
            if r.ge(&divisor) {
                r.sub(&divisor);
                q.0[0] |= 1;
            }
        }
        (q, r)
    }

    fn to_le_bytes(self) -> Vec<u8> {
        self.0.iter().flat_map(|l| l.to_le_bytes()).collect()
    }
}

impl core::ops::Div for U256 {
    type Output = Self;
    fn div(self, rhs: Self) -> Self {
        self.div_rem(rhs).0
    }
}

impl core::ops::Rem for U256 {
    type Output = Self;
    fn rem(self, rhs: Self) -> Self {
        self.div_rem(rhs).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_follow_circom() {
        let m1 = -Fr::one(); // "negative one" for circom's comparisons
        assert_eq!(duo(DuoOp::Lt, m1, Fr::one()), Fr::one());
        assert_eq!(duo(DuoOp::Gt, m1, Fr::one()), Fr::zero());
        for (op, a, b, expected) in [
            (DuoOp::Leq, 3u64, 3u64, 1u64),
            (DuoOp::Div, 3, 0, 0),
            (DuoOp::Idiv, 7, 2, 3),
            (DuoOp::Mod, 7, 4, 3),
            (DuoOp::Shr, 0b1011, 1, 0b101),
            (DuoOp::Shl, 0b1011, 2, 0b101100),
            (DuoOp::Band, 6, 3, 2),
            (DuoOp::Bor, 6, 3, 7),
            (DuoOp::Bxor, 6, 3, 5),
            (DuoOp::Pow, 3, 4, 81),
            (DuoOp::Land, 3, 0, 0),
            (DuoOp::Lor, 3, 0, 1),
            (DuoOp::Neq, 3, 3, 0),
        ] {
            let got = duo(op, Fr::from(a), Fr::from(b));
            assert_eq!(got, Fr::from(expected), "{op:?}({a}, {b})");
        }
        assert_eq!(duo(DuoOp::Shr, m1, Fr::from(254u8)), Fr::zero());
        let big = Fr::from(u128::MAX) * Fr::from(u64::MAX);
        let (q, r) = (
            duo(DuoOp::Idiv, big, Fr::from(1000u16)),
            duo(DuoOp::Mod, big, Fr::from(1000u16)),
        );
        assert_eq!(q * Fr::from(1000u16) + r, big);
    }

    #[test]
    fn refuses_malformed_graphs() {
        let bad = |bytes: &[u8]| WitnessGraph::from_bytes(bytes).err();
        assert!(matches!(bad(b"nope"), Some(WitnessError::Malformed(_))));
        assert!(matches!(bad(GRAPH_MAGIC), Some(WitnessError::Malformed(_))));
        // One node claimed, none present.
        let mut file = GRAPH_MAGIC.to_vec();
        file.extend(1u64.to_le_bytes());
        assert!(matches!(bad(&file), Some(WitnessError::Malformed(_))));
        // A node that refers to itself.
        let node = proto::Node {
            node: Some(proto::Kind::UnoOp(proto::UnoOpNode { op: 0, a_idx: 0 })),
        };
        file.extend(node.encode_length_delimited_to_vec());
        assert!(matches!(
            bad(&file),
            Some(WitnessError::BadReference { node: 0, target: 0 })
        ));
    }
}
