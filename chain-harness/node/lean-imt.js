// zk-kit's TypeScript LeanIMT (npm @zk-kit/lean-imt, hashing with poseidon-lite's circomlib
// Poseidon) replaying what Canopy's test sends on stdin, for the differential test
// (tests/tests/lean_imt_chain.rs):
//   { "ops": [{"insert": "7"} | {"insertMany": ["1", "2"]} | {"update": [index, "9"]}
//             | {"updateMany": [[index, ...], ["9", ...]]} | {"remove": index}, ...],
//     "proofs": [index, ...],
//     "verify": [{"root": "…", "leaf": "…", "index": n, "siblings": ["…", …]}, ...] }
// and printing { "roots": [...after each op], "sizes": [...], "depths": [...],
//               "proofs": [{root, leaf, index, siblings}], "verified": [bool, ...] },
// every field element as a decimal string.
const { LeanIMT } = require("@zk-kit/lean-imt");
const { poseidon2 } = require("poseidon-lite");

const hash = (a, b) => poseidon2([a, b]);
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const request = JSON.parse(input);
  const tree = new LeanIMT(hash);
  const out = { roots: [], sizes: [], depths: [], proofs: [], verified: [] };
  for (const op of request.ops) {
    if (op.insert !== undefined) tree.insert(BigInt(op.insert));
    else if (op.insertMany !== undefined) tree.insertMany(op.insertMany.map(BigInt));
    else if (op.update !== undefined) tree.update(op.update[0], BigInt(op.update[1]));
    else if (op.updateMany !== undefined) tree.updateMany(op.updateMany[0], op.updateMany[1].map(BigInt));
    else if (op.remove !== undefined) tree.update(op.remove, 0n);
    else throw new Error(`unknown op ${JSON.stringify(op)}`);
    out.roots.push(tree.size === 0 ? null : tree.root.toString());
    out.sizes.push(tree.size);
    out.depths.push(tree.depth);
  }
  for (const index of request.proofs) {
    const p = tree.generateProof(index);
    out.proofs.push({
      root: p.root.toString(),
      leaf: p.leaf.toString(),
      index: p.index,
      siblings: p.siblings.map((s) => s.toString()),
    });
  }
  for (const p of request.verify) {
    const proof = { root: BigInt(p.root), leaf: BigInt(p.leaf), index: p.index, siblings: p.siblings.map(BigInt) };
    out.verified.push(LeanIMT.verifyProof(proof, hash));
  }
  process.stdout.write(JSON.stringify(out));
});
