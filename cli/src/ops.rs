//! The operator's commands, and the one way a block is applied (shared with the demo).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use follower::{commit_block, BlockChanges, BlockMeta, CommitError};
use hasher::PoseidonHasher;
use serde_json::json;
use tree_core::{Depth, History, MerkleTree, Snapshot, TreeError};
use tree_engines::{postgres_url, DbConfig, DbTree, Engine, EngineError, PostgresOptions};

use crate::events::{fr_hex, parse_fr, read_blocks_from, Block};
use crate::{CliError, Output};

/// The tree type every command works on.
pub type Tree = DbTree<PoseidonHasher>;

/// The database a command names: a directory, or a `postgres://` URL and the tree in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Db {
    /// `--db`: a directory or a `postgres://` URL.
    pub path: PathBuf,
    /// `--tree`: the tree of a PostgreSQL database (every command's global flag).
    pub tree: String,
}

impl Db {
    /// `path`, with the default tree name.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            tree: PostgresOptions::default().tree,
        }
    }

    /// The engine configuration that opens it.
    #[must_use]
    pub fn config(&self) -> DbConfig {
        DbConfig::new(&self.path).tree(self.tree.clone())
    }

    /// The URL, when it is a PostgreSQL database.
    #[must_use]
    pub fn postgres_url(&self) -> Option<&str> {
        postgres_url(&self.path)
    }

    /// How messages name it: the directory, or the URL (password hidden) and the tree.
    #[must_use]
    pub fn display(&self) -> String {
        match self.postgres_url() {
            Some(url) => format!("{} (tree {})", tree_postgres::redact_url(url), self.tree),
            None => self.path.display().to_string(),
        }
    }
}

/// Opens the tree `db` names (which must hold one) with its stored depth.
///
/// # Errors
/// Locked, not a tree, damaged.
pub fn open(db: &Db) -> Result<Tree, CliError> {
    Ok(Tree::open_existing(&db.config())?)
}

/// The last applied block: the metadata every block writes (a follower's record or an older
/// database's bare number).
#[must_use]
pub fn last_block(tree: &Tree) -> Option<u64> {
    follower::read_block(tree).ok().flatten().map(|m| m.number)
}

/// Blocks land with their checkpoint in one batch; a database written otherwise (blocks applied
/// by hand, checkpoints pruned to none) gets its last block's checkpoint recorded now.
pub fn repair_checkpoint(tree: &mut Tree) -> Result<(), CliError> {
    let latest = tree.checkpoints()?.last().map(|c| c.id);
    if let Some(block) = last_block(tree) {
        if latest.is_none_or(|id| id < block) {
            tree.checkpoint(block)?;
        }
    }
    Ok(())
}

/// Applies one block: registrations, removals, the block number as metadata and a checkpoint
/// named by the block, all in one atomic batch (the batch `follower::commit_block` lands too).
///
/// # Errors
/// [`CliError::BadEvent`] when the tree refuses the block (nothing is written), storage errors.
pub fn apply_block(tree: &mut Tree, block: &Block) -> Result<(), CliError> {
    let batch = block_changes(tree.next_index(), block).to_batch(&BlockMeta::number(block.number));
    tree.apply_checkpointed(batch, block.number)
        .map_err(|e| block_error(block, e))
}

/// [`apply_block`] through a shared handle: readers keep reading while the block hashes; the
/// block and its checkpoint are one commit ([`follower::commit_block`]).
///
/// # Errors
/// As [`apply_block`].
pub fn apply_block_shared(
    tree: &tree_engines::SharedDbTree<PoseidonHasher>,
    block: &Block,
) -> Result<(), CliError> {
    let next = tree.read(MerkleTree::next_index);
    commit_block(
        tree,
        &BlockMeta::number(block.number),
        &block_changes(next, block),
        None,
    )
    .map_err(|e| match e {
        CommitError::Tree(e) => block_error(block, e),
        other => other.into(),
    })?;
    Ok(())
}

/// A block of the events file as leaf changes: registrations appended at `next`, then removals.
fn block_changes(next: u64, block: &Block) -> BlockChanges {
    let mut changes = BlockChanges::new();
    for (index, leaf) in (next..).zip(&block.register) {
        changes.set(index, *leaf);
    }
    for &index in &block.remove {
        changes.delete(index);
    }
    changes
}

fn block_error(block: &Block, e: tree_engines::DbTreeError) -> CliError {
    match e {
        tree_core::persistent::PersistentTreeError::Tree(rule) => CliError::BadEvent {
            line: block.line,
            reason: format!("block {}: {rule}", block.number),
        },
        other => other.into(),
    }
}

/// Why `index` has no membership proof, in words: past the members, or erased (leaf 0).
///
/// # Errors
/// Storage errors reading the leaf.
pub fn not_a_member(tree: &Tree, index: u64) -> Result<Option<String>, CliError> {
    let members = tree.next_index();
    if index >= members {
        return Ok(Some(if members == 0 {
            format!("index {index} is not a member: the set is empty")
        } else {
            format!(
                "index {index} is not a member: the set has {members} members (indices 0 to {})",
                members - 1
            )
        }));
    }
    if tree.get(index)? == hasher::Fr::from(0u64) {
        return Ok(Some(format!(
            "index {index} is not a member: its membership was erased"
        )));
    }
    Ok(None)
}

/// Refuses a directory that already holds anything, or a PostgreSQL tree that already exists:
/// `init` and `import` create databases.
fn ensure_empty(db: &Db) -> Result<(), CliError> {
    let occupied = if db.postgres_url().is_some() {
        let reader = PostgresOptions {
            tree: db.tree.clone(),
            role: tree_postgres::Role::Reader,
            ..PostgresOptions::default()
        };
        match Tree::open_existing(&db.config().postgres(reader)) {
            Ok(_) => true,
            Err(
                tree_core::persistent::PersistentTreeError::NotATree
                | tree_core::persistent::PersistentTreeError::Store(EngineError::Postgres(
                    tree_postgres::PgError::NoSuchTree { .. },
                )),
            ) => false,
            Err(other) => return Err(other.into()),
        }
    } else {
        let dir = &db.path;
        dir.exists()
            && std::fs::read_dir(dir)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
    };
    if occupied {
        return Err(CliError::Usage(format!(
            "{} already exists and is not empty",
            db.display()
        )));
    }
    Ok(())
}

/// The configuration that creates `db` with `engine` (detected from the URL when not given).
fn create_config(db: &Db, engine: Option<Engine>) -> DbConfig {
    let mut config = db.config();
    config.engine = engine;
    config
}

/// `canopy init`.
///
/// # Errors
/// The directory already holds data; storage errors.
pub fn init(db: &Db, depth: u8, engine: Option<Engine>) -> Result<Output, CliError> {
    let depth = Depth::new(depth).map_err(|e| CliError::Usage(format!("--depth: {e}")))?;
    ensure_empty(db)?;
    let mut tree = Tree::open(&create_config(db, engine), depth)?;
    tree.close()?;
    let engine = tree.store().engine();
    Ok(Output {
        text: format!(
            "created an empty tree of depth {depth} at {} ({engine})",
            db.display()
        ),
        json: json!({"db": db.display(), "depth": depth.get(), "engine": engine.name(), "root": fr_hex(&tree.root())}),
    })
}

/// `canopy apply`.
///
/// # Errors
/// Bad events (with their line), storage errors. Blocks before the failing one stay applied.
pub fn apply(db: &Db, events: &Path) -> Result<Output, CliError> {
    let blocks = read_blocks_from(events)?;
    let mut tree = open(db)?;
    repair_checkpoint(&mut tree)?;
    let resumed_after = last_block(&tree);
    let (mut applied, mut skipped) = (0usize, 0usize);
    for block in &blocks {
        // Re-applying a block is refused: a restart skips what the database already holds.
        if resumed_after.is_some_and(|last| block.number <= last) {
            skipped += 1;
            continue;
        }
        apply_block(&mut tree, block)?;
        applied += 1;
    }
    tree.close()?;
    Ok(Output {
        text: format!(
            "applied {applied} blocks ({skipped} already applied, skipped); {} members, last block {:?}, root {}",
            tree.next_index(),
            last_block(&tree),
            fr_hex(&tree.root())
        ),
        json: json!({
            "applied": applied,
            "skipped": skipped,
            "next_index": tree.next_index(),
            "last_block": last_block(&tree),
            "root": fr_hex(&tree.root()),
        }),
    })
}

/// `canopy root`.
///
/// # Errors
/// Opening the tree.
pub fn root(db: &Db) -> Result<Output, CliError> {
    let tree = open(db)?;
    let roots: Vec<String> = tree.roots()?.iter().map(fr_hex).collect();
    let checkpoints: Vec<u64> = tree.checkpoints()?.iter().map(|c| c.id).collect();
    Ok(Output {
        text: format!(
            "root {}\nmembers (next_index) {}\nlast block {:?}\nacceptable roots {}\ncheckpoints {:?}",
            fr_hex(&tree.root()),
            tree.next_index(),
            last_block(&tree),
            roots.join(", "),
            checkpoints
        ),
        json: json!({
            "root": fr_hex(&tree.root()),
            "next_index": tree.next_index(),
            "last_block": last_block(&tree),
            "roots": roots,
            "checkpoints": checkpoints,
        }),
    })
}

/// `canopy proof`.
///
/// # Errors
/// An index out of range; storage errors.
pub fn proof(db: &Db, index: u64) -> Result<Output, CliError> {
    let tree = open(db)?;
    if let Some(reason) = not_a_member(&tree, index)? {
        return Err(CliError::NotAMember(reason));
    }
    let proof = tree.proof(index)?;
    let leaf = tree.get(index)?;
    let path: Vec<String> = proof.path_elements().iter().map(fr_hex).collect();
    Ok(Output {
        text: format!(
            "leaf {index} = {}\nroot {}\npath_index {:?}\npath_elements\n  {}",
            fr_hex(&leaf),
            fr_hex(&tree.root()),
            proof.path_index(),
            path.join("\n  ")
        ),
        json: json!({
            "index": index,
            "leaf": fr_hex(&leaf),
            "root": fr_hex(&tree.root()),
            "path_elements": path,
            "identity_path_index": proof.path_index(),
        }),
    })
}

/// `canopy rewind`.
///
/// # Errors
/// An unknown block; storage errors.
pub fn rewind(db: &Db, block: u64) -> Result<Output, CliError> {
    let mut tree = open(db)?;
    tree.rewind_to(block).map_err(|e| match e {
        tree_core::persistent::PersistentTreeError::Tree(TreeError::UnknownCheckpoint {
            id,
            oldest,
        }) => CliError::UnknownBlock { block: id, oldest },
        other => other.into(),
    })?;
    tree.close()?;
    Ok(Output {
        text: format!(
            "rewound to block {block}: {} members, root {}",
            tree.next_index(),
            fr_hex(&tree.root())
        ),
        json: json!({"block": block, "next_index": tree.next_index(), "root": fr_hex(&tree.root())}),
    })
}

/// `canopy export`.
///
/// # Errors
/// Storage and file errors.
pub fn export(db: &Db, file: &Path) -> Result<Output, CliError> {
    let tree = open(db)?;
    let io = |source| CliError::Io {
        path: file.to_path_buf(),
        source,
    };
    let snapshot = Snapshot::of(&tree)?;
    snapshot
        .write_to(BufWriter::new(File::create(file).map_err(io)?))
        .map_err(io)?;
    Ok(Output {
        text: format!(
            "wrote {} leaves to {} (root {})",
            tree.next_index(),
            file.display(),
            fr_hex(&tree.root())
        ),
        json: json!({"file": file, "next_index": tree.next_index(), "root": fr_hex(&tree.root())}),
    })
}

/// `canopy import`.
///
/// # Errors
/// A bad or mismatched snapshot; an existing database; file errors.
pub fn import(
    db: &Db,
    file: &Path,
    expect_root: Option<&str>,
    engine: Option<Engine>,
) -> Result<Output, CliError> {
    let expect = expect_root
        .map(parse_fr)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--expect-root: {e}")))?;
    ensure_empty(db)?;
    let reader = File::open(file).map_err(|source| CliError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let snapshot =
        Snapshot::<PoseidonHasher>::read_from(BufReader::new(reader)).map_err(|source| {
            CliError::Snapshot {
                path: file.to_path_buf(),
                source,
            }
        })?;
    let tree = Tree::open(&create_config(db, engine), snapshot.depth)?;
    let tree = snapshot
        .import(tree, expect.as_ref())
        .map_err(|source| CliError::Import {
            path: file.to_path_buf(),
            source,
        })?;
    Ok(Output {
        text: format!(
            "imported {} leaves into {} (root {})",
            tree.next_index(),
            db.display(),
            fr_hex(&tree.root())
        ),
        json: json!({"db": db.display(), "next_index": tree.next_index(), "root": fr_hex(&tree.root())}),
    })
}

/// `canopy check`.
///
/// # Errors
/// Any stored node that disagrees with its children; storage errors.
pub fn check(db: &Db) -> Result<Output, CliError> {
    let tree = open(db)?;
    let issues = tree.verify_integrity()?;
    if let Some(first) = issues.first() {
        return Err(CliError::Integrity {
            count: issues.len(),
            level: first.addr.level,
            index: first.addr.index,
        });
    }
    Ok(Output {
        text: format!(
            "ok: every stored node matches its children ({} members)",
            tree.next_index()
        ),
        json: json!({"ok": true, "next_index": tree.next_index()}),
    })
}
