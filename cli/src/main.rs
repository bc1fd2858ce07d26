//! `canopy`: a membership tree on an embedded sled database, driven like an RLN node drives it.
//!
//! `canopy demo` plays a membership contract end to end; `init`, `apply`, `root`, `proof`,
//! `rewind`, `export`, `import` and `check` are the operator's tools. Human-readable output by
//! default, `--json` for machines; errors are one line on stderr and a non-zero exit code.

mod demo;
mod events;
mod follow;
mod ops;
mod progress;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "canopy",
    version,
    about = "Canopy membership trees on an embedded sled database"
)]
struct Cli {
    /// Print results as one JSON object.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// The main job: blocks of registrations and removals with checkpoints, a reorg, a reopen,
    /// and a real RLN proof verified against the root window.
    Demo {
        /// Database directory (default: a fresh temporary directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Members registered in all.
        #[arg(long, default_value_t = 20_000)]
        members: u64,
        /// Blocks to play.
        #[arg(long, default_value_t = 20)]
        blocks: u64,
    },
    /// Creates an empty tree.
    Init {
        /// Database directory (must not hold a tree yet).
        #[arg(long)]
        db: PathBuf,
        /// Tree depth (capacity 2^depth).
        #[arg(long, default_value_t = 20)]
        depth: u8,
    },
    /// Applies blocks from a JSON-lines file (one `{"block", "register", "remove"}` per line);
    /// blocks already applied are skipped, so a restart resumes where it stopped.
    Apply {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
        /// The events file (`-` for stdin).
        events: PathBuf,
    },
    /// Prints the root, the member count and the last applied block.
    Root {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
    },
    /// Prints the Merkle witness of a member.
    Proof {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
        /// The member's index.
        index: u64,
    },
    /// Rewinds to the state right after a block (a reorg).
    Rewind {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
        /// The block to go back to.
        block: u64,
    },
    /// Writes a checksummed snapshot.
    Export {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
        /// Snapshot file.
        file: PathBuf,
    },
    /// Builds a new database from a snapshot.
    Import {
        /// Database directory (must not exist or be empty).
        #[arg(long)]
        db: PathBuf,
        /// Snapshot file.
        file: PathBuf,
        /// Refuse the snapshot unless its root is this one (0x-prefixed hex, big-endian).
        #[arg(long)]
        expect_root: Option<String>,
    },
    /// Serves the tree over HTTP (loopback by default) while applying blocks from `--events`.
    Serve {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8645")]
        listen: std::net::SocketAddr,
        /// Events to apply while serving (`-` for stdin).
        #[arg(long)]
        events: Option<PathBuf>,
    },
    /// Follows a membership contract (WakuRlnV2's interface) on an Ethereum node: state sync,
    /// then every block with its checkpoint in one commit, roots checked against `root()`,
    /// reorgs rewound. Runs until Ctrl-C (or, with `--once`, until caught up).
    Follow {
        /// JSON-RPC URL of the node (http or https).
        #[arg(long)]
        rpc: String,
        /// Address of the membership contract.
        #[arg(long)]
        contract: String,
        /// Database directory (created when absent).
        #[arg(long, default_value = "canopy-db")]
        db: PathBuf,
        /// Replay from this block (with `--sync replay`) or pin state sync at it.
        #[arg(long)]
        from_block: Option<u64>,
        /// Stay this many blocks behind the head.
        #[arg(long, default_value_t = 0)]
        confirmations: u64,
        /// How an empty database is filled: `state` (the contract's leaves at one block) or
        /// `replay` (every event since deployment; needs an archive node).
        #[arg(long, default_value = "state")]
        sync: String,
        /// Serve `/health`, `/root`, `/roots`, `/proof/{index}` here while following.
        #[arg(long)]
        serve: Option<std::net::SocketAddr>,
        /// Stop once caught up with the head.
        #[arg(long)]
        once: bool,
    },
    /// The `min_parallel_nodes` sweep, thread scaling and DashMap comparison (tree-bench's
    /// `tune`; e.g. `canopy tune --quick`, `canopy tune --help`).
    Tune {
        /// Arguments for the sweep.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Recomputes every stored node and reports mismatches.
    Check {
        /// Database directory.
        #[arg(long)]
        db: PathBuf,
    },
}

/// Why a command failed: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The tree or its database refused or failed.
    #[error("{0}")]
    Tree(String),
    /// A bad line in an events file.
    #[error("events line {line}: {reason}")]
    BadEvent {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A bad argument value.
    #[error("{0}")]
    Usage(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<tree_sled::SledTreeError> for CliError {
    fn from(e: tree_sled::SledTreeError) -> Self {
        Self::Tree(match e {
            tree_sled::SledTreeError::NotATree => {
                "no Canopy tree there (create one with `canopy init`)".to_owned()
            }
            other => other.to_string(),
        })
    }
}

impl From<tree_core::TreeError> for CliError {
    fn from(e: tree_core::TreeError) -> Self {
        Self::Tree(e.to_string())
    }
}

/// What a command prints: a human text and the same as JSON.
pub struct Output {
    text: String,
    json: serde_json::Value,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Retries, reorgs and progress of `follow` are logged to stderr; RUST_LOG sets the level.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let result = match cli.command {
        Command::Demo {
            db,
            members,
            blocks,
        } => demo::run(db, members, blocks, cli.json),
        Command::Init { db, depth } => ops::init(&db, depth),
        Command::Apply { db, events } => ops::apply(&db, &events),
        Command::Root { db } => ops::root(&db),
        Command::Proof { db, index } => ops::proof(&db, index),
        Command::Rewind { db, block } => ops::rewind(&db, block),
        Command::Export { db, file } => ops::export(&db, &file),
        Command::Import {
            db,
            file,
            expect_root,
        } => ops::import(&db, &file, expect_root.as_deref()),
        Command::Serve { db, listen, events } => serve::run(&db, listen, events),
        Command::Follow {
            rpc,
            contract,
            db,
            from_block,
            confirmations,
            sync,
            serve,
            once,
        } => follow::sync_mode(&sync).and_then(|sync| {
            follow::run(follow::FollowArgs {
                rpc: &rpc,
                contract: &contract,
                db: &db,
                config: follower::FollowerConfig {
                    sync,
                    from_block,
                    confirmations,
                    ..follower::FollowerConfig::default()
                },
                serve,
                once,
            })
        }),
        Command::Tune { args } => {
            tree_bench::tune::run_cli(std::iter::once("canopy tune".to_owned()).chain(args))
                .map(|()| Output {
                    text: String::new(),
                    json: serde_json::json!({"done": true}),
                })
                .map_err(|e| CliError::Usage(e.to_string()))
        }
        Command::Check { db } => ops::check(&db),
    };
    match result {
        Ok(output) => {
            if cli.json {
                println!("{}", output.json);
            } else if !output.text.is_empty() {
                println!("{}", output.text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
