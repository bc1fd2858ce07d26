//! Side-by-side table: our trees vs zerokit_utils 3.0.0's, same Poseidon, same inputs, one run.
//!
//! `cargo run --release -p tree-bench --bin compare [-- --quick]`
//!
//! Every timed run starts from a clone of the same prepared tree (the clone is not timed).
//! Construction and peak memory run in a child process each, so the peak (VmHWM) is that tree's.

use std::process::Command;
use std::time::Instant;

use hasher::{Fr, PoseidonHasher};
use tree_bench::{fmt_duration, leaves, proc_status_bytes, time_pair, Stats, ZkPoseidon};
use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use zerokit_utils::merkle_tree::{
    FullMerkleTree as ZkFull, OptimalMerkleTree as ZkOptimal, ZerokitMerkleTree,
};

const DEPTH: u8 = 20;

struct Row {
    op: String,
    ours: Stats,
    theirs: Stats,
}

fn row(op: impl Into<String>, (ours, theirs): (Stats, Stats)) -> Row {
    Row {
        op: op.into(),
        ours,
        theirs,
    }
}

fn print_rows(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!("| operation | ours (median, min–max) | zerokit (median, min–max) | zerokit / ours |");
    println!("|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} ({}–{}) | {} ({}–{}) | {:.2}x |",
            r.op,
            fmt_duration(r.ours.median),
            fmt_duration(r.ours.min),
            fmt_duration(r.ours.max),
            fmt_duration(r.theirs.median),
            fmt_duration(r.theirs.min),
            fmt_duration(r.theirs.max),
            r.theirs.median.as_secs_f64() / r.ours.median.as_secs_f64()
        );
    }
}

/// The operations of the tree-core issue on a tree already holding `base` leaves.
fn op_rows<T, Z>(ours: &T, theirs: &Z, base: u64, quick: bool) -> Vec<Row>
where
    T: MerkleTree<Hasher = PoseidonHasher> + Clone,
    Z: ZerokitMerkleTree<Hasher = ZkPoseidon> + Clone,
{
    let reps = |n: usize| if quick { n.div_ceil(4).max(1) } else { n };
    let mut rows = Vec::new();
    let b = usize::try_from(base).unwrap_or(usize::MAX);
    let v = Fr::from(999u64);
    rows.push(row(
        "set (1 leaf)",
        time_pair(
            reps(40),
            || ours.clone(),
            |t| t.set(base / 2, v).unwrap(),
            || theirs.clone(),
            |t| t.set(b / 2, v).unwrap(),
        ),
    ));
    rows.push(row(
        "delete (1 leaf)",
        time_pair(
            reps(40),
            || ours.clone(),
            |t| t.delete(base / 3).unwrap(),
            || theirs.clone(),
            |t| t.delete(b / 3).unwrap(),
        ),
    ));
    for log in [10u32, 16] {
        let new = leaves(base, 1u64 << log);
        rows.push(row(
            format!("set_range 2^{log} at next_index"),
            time_pair(
                reps(if log == 10 { 20 } else { 5 }),
                || ours.clone(),
                |t| t.set_range(base, new.iter().copied()).unwrap(),
                || theirs.clone(),
                |t| t.set_range(b, new.iter().copied()).unwrap(),
            ),
        ));
    }
    // override_range: 2^12 writes straddling next_index, 2^8 removals spread over the set leaves.
    let start = base - (1 << 11);
    let writes = leaves(1 << 40, 1 << 12);
    let removes: Vec<u64> = (0..256u64).map(|i| i * (start / 256)).collect();
    let removes_zk: Vec<usize> = removes
        .iter()
        .map(|&i| usize::try_from(i).unwrap_or(0))
        .collect();
    let s = usize::try_from(start).unwrap_or(0);
    rows.push(row(
        "override_range 2^12 writes + 2^8 removals",
        time_pair(
            reps(8),
            || ours.clone(),
            |t| {
                t.override_range(start, writes.iter().copied(), removes.iter().copied())
                    .unwrap()
            },
            || theirs.clone(),
            |t| {
                t.override_range(s, writes.iter().copied(), removes_zk.iter().copied())
                    .unwrap()
            },
        ),
    ));
    rows.push(row(
        "proof",
        time_pair(
            reps(400),
            || (),
            |()| {
                std::hint::black_box(ours.proof(base / 2 + 1).ok());
            },
            || (),
            |()| {
                std::hint::black_box(theirs.proof(b / 2 + 1).ok());
            },
        ),
    ));
    rows
}

/// Child mode: build one tree of `kind` at `depth` with `n` leaves; print seconds and peak bytes.
fn construct(kind: &str, depth: u8, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let baseline = proc_status_bytes("VmRSS").unwrap_or(0);
    let leaves = leaves(0, n);
    let leaves_bytes = proc_status_bytes("VmRSS").unwrap_or(0);
    let d = Depth::new(depth)?;
    let resident: u64;
    let mut heap = 0usize;
    let started = Instant::now();
    let stored = match kind {
        "ours-optimal" => {
            let mut t = OptimalMerkleTree::<PoseidonHasher>::new(d);
            t.set_range(0, leaves.iter().copied())?;
            std::hint::black_box(t.root());
            resident = proc_status_bytes("VmRSS").unwrap_or(0);
            heap = t.heap_bytes();
            t.stored_nodes()
        }
        "ours-full" => {
            let mut t = FullMerkleTree::<PoseidonHasher>::new(d)?;
            t.set_range(0, leaves.iter().copied())?;
            std::hint::black_box(t.root());
            resident = proc_status_bytes("VmRSS").unwrap_or(0);
            heap = t.heap_bytes();
            t.stored_nodes()
        }
        "zerokit-optimal" => {
            let mut t = ZkOptimal::<ZkPoseidon>::default(usize::from(depth))?;
            t.set_range(0, leaves.iter().copied())?;
            std::hint::black_box(t.root());
            resident = proc_status_bytes("VmRSS").unwrap_or(0);
            0
        }
        "zerokit-full" => {
            let mut t = ZkFull::<ZkPoseidon>::default(usize::from(depth))?;
            t.set_range(0, leaves.iter().copied())?;
            std::hint::black_box(t.root());
            resident = proc_status_bytes("VmRSS").unwrap_or(0);
            0
        }
        other => return Err(format!("unknown kind {other}").into()),
    };
    let secs = started.elapsed().as_secs_f64();
    let peak = proc_status_bytes("VmHWM").unwrap_or(0);
    let resident = resident.saturating_sub(leaves_bytes.max(baseline));
    // Peak attributable to the tree: the high-water mark minus what the input leaves held.
    let tree_peak = peak.saturating_sub(leaves_bytes.max(baseline));
    println!("{secs} {tree_peak} {resident} {stored} {heap}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--construct") {
        let kind = args.get(2).ok_or("kind")?;
        let depth: u8 = args.get(3).ok_or("depth")?.parse()?;
        let n: u64 = args.get(4).ok_or("n")?.parse()?;
        return construct(kind, depth, n);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let base: u64 = if quick { 1 << 14 } else { 1 << 16 };
    println!(
        "Canopy vs zerokit_utils 3.0.0, depth {DEPTH}, the same Poseidon (ours, FastPoseidon) for both, \
         {} threads, tree prefilled with {base} leaves{}",
        std::thread::available_parallelism().map_or(1, usize::from),
        if quick { " (--quick)" } else { "" }
    );
    let d = Depth::new(DEPTH)?;
    let prefill = leaves(0, base);
    let mut ours_opt = OptimalMerkleTree::<PoseidonHasher>::new(d);
    ours_opt.set_range(0, prefill.iter().copied())?;
    let mut zk_opt = ZkOptimal::<ZkPoseidon>::default(usize::from(DEPTH))?;
    zk_opt.set_range(0, prefill.iter().copied())?;
    assert_eq!(ours_opt.root(), zk_opt.root(), "prefilled roots differ");
    print_rows(
        "OptimalMerkleTree (sparse)",
        &op_rows(&ours_opt, &zk_opt, base, quick),
    );
    drop((ours_opt, zk_opt));

    let mut ours_full = FullMerkleTree::<PoseidonHasher>::new(d)?;
    ours_full.set_range(0, prefill.iter().copied())?;
    let mut zk_full = ZkFull::<ZkPoseidon>::default(usize::from(DEPTH))?;
    zk_full.set_range(0, prefill.iter().copied())?;
    assert_eq!(ours_full.root(), zk_full.root(), "prefilled roots differ");
    print_rows(
        "FullMerkleTree (dense)",
        &op_rows(&ours_full, &zk_full, base, quick),
    );
    drop((ours_full, zk_full));

    let n: u64 = if quick { 1 << 16 } else { 1 << 20 };
    println!("\nConstruction: new + set_range(0, {n} leaves), one child process each");
    println!("| tree | depth | time | peak RSS | RSS after | stored nodes | node heap B/node | RSS after B/node | peak B/node |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe()?;
    for (kind, depth) in [
        ("ours-optimal", 20u8),
        ("zerokit-optimal", 20),
        ("ours-full", 20),
        ("zerokit-full", 20),
        ("ours-optimal", 32),
        ("zerokit-optimal", 32),
    ] {
        let out = Command::new(&exe)
            .args(["--construct", kind, &depth.to_string(), &n.to_string()])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<f64> = text
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        let [secs, peak, resident, stored, heap] = fields[..] else {
            println!(
                "| {kind} | {depth} | failed: {} |",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            continue;
        };
        let per_node = |bytes: f64| {
            if stored > 0.0 {
                format!("{:.1} B", bytes / stored)
            } else {
                "–".into()
            }
        };
        println!(
            "| {kind} | {depth} | {secs:.2} s | {:.1} MiB | {:.1} MiB | {} | {} | {} | {} |",
            peak / 1048576.0,
            resident / 1048576.0,
            if stored > 0.0 {
                format!("{stored:.0}")
            } else {
                "–".into()
            },
            per_node(heap),
            per_node(resident),
            per_node(peak),
        );
    }
    Ok(())
}
