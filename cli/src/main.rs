//! `canopy`: the off-chain mirror of an RLN membership contract (WakuRlnV2's LazyIMT), on an
//! embedded sled or redb database: it follows the contract (`follow`), answers its views to RLN
//! clients over Ethereum JSON-RPC and HTTP (`follow --serve`, `serve`), and verifies RLN proofs
//! (`verify`).
//!
//! `canopy demo` plays a membership contract end to end; `init`, `apply`, `root`, `proof`,
//! `rewind`, `export`, `import` and `check` are the operator's tools. Human-readable output by
//! default, `--json` for machines; errors are one line on stderr and a non-zero exit code.

mod config;
mod demo;
mod events;
mod follow;
mod ops;
mod progress;
mod serve;
mod server;
mod shutdown;
mod status;
mod telemetry;
mod verify;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::config::{CanopyConfig, ColorChoice, LogFormat};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "canopy",
    version,
    about = "Canopy: the off-chain mirror of an RLN membership contract (WakuRlnV2) on sled or redb: follow it, serve its views over JSON-RPC and HTTP, verify RLN proofs"
)]
struct Cli {
    /// Print results as one JSON object.
    #[arg(long, global = true)]
    json: bool,
    /// Log line format on stderr (`text` or `json`); also `log.format` in the config file.
    #[arg(long, global = true, value_enum)]
    log_format: Option<LogFormat>,
    /// ANSI colours in text logs: auto (only when stderr is a terminal), always, never; also
    /// `log.color` in the config file.
    #[arg(long, global = true, value_enum)]
    color: Option<ColorChoice>,
    /// The tree, when `--db` is a `postgres://` URL: each name is its own tree in the database
    /// (default `default`); also `tree` in the config file.
    #[arg(long, global = true)]
    tree: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// The main job: blocks of registrations and removals with checkpoints, a reorg, a reopen,
    /// and a real RLN proof verified against the root window.
    Demo {
        /// Database directory or postgres:// URL (default: a fresh temporary directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Members registered in all.
        #[arg(long, default_value_t = 20_000)]
        members: u64,
        /// Blocks to play.
        #[arg(long, default_value_t = 20)]
        blocks: u64,
        /// Storage engine of the demo's database: sled or redb.
        #[arg(long, default_value_t = tree_engines::Engine::Sled)]
        engine: tree_engines::Engine,
        /// Configuration file (TOML): its `[prover]` section (table budget, arithmetic).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Creates an empty tree.
    Init {
        /// Database directory or postgres:// URL (must not hold a tree yet).
        #[arg(long)]
        db: PathBuf,
        /// Tree depth (capacity 2^depth).
        #[arg(long, default_value_t = 20)]
        depth: u8,
        /// Storage engine: sled (what zerokit runs, the default for a directory) or redb
        /// (maintained, stable format); a `postgres://` URL is PostgreSQL. Every other command
        /// detects it from the database.
        #[arg(long)]
        engine: Option<tree_engines::Engine>,
    },
    /// Applies blocks from a JSON-lines file (one `{"block", "register", "remove"}` per line);
    /// blocks already applied are skipped, so a restart resumes where it stopped.
    Apply {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
        /// The events file (`-` for stdin).
        events: PathBuf,
    },
    /// Prints the root, the member count and the last applied block.
    Root {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
    },
    /// Prints the Merkle witness of a member.
    Proof {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
        /// The member's index.
        index: u64,
    },
    /// Rewinds to the state right after a block (a reorg).
    Rewind {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
        /// The block to go back to.
        block: u64,
    },
    /// Writes a checksummed snapshot.
    Export {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
        /// Snapshot file.
        file: PathBuf,
    },
    /// Builds a new database from a snapshot.
    Import {
        /// Database directory or postgres:// URL (must not exist or be empty).
        #[arg(long)]
        db: PathBuf,
        /// Snapshot file.
        file: PathBuf,
        /// Refuse the snapshot unless its root is this one (0x-prefixed hex, big-endian).
        #[arg(long)]
        expect_root: Option<String>,
        /// Storage engine of the new database: sled (default) or redb; a `postgres://` URL is
        /// PostgreSQL.
        #[arg(long)]
        engine: Option<tree_engines::Engine>,
    },
    /// Serves the tree over HTTP (loopback by default) while applying blocks from `--events`;
    /// stops cleanly on SIGINT/SIGTERM.
    Serve {
        /// Database directory or postgres:// URL (default `canopy-db`).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Address to listen on (default 127.0.0.1:8645).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Events to apply while serving (`-` for stdin).
        #[arg(long)]
        events: Option<PathBuf>,
        /// A read replica of a PostgreSQL tree (`--db postgres://…`): holds the tree in memory
        /// and follows what its writer commits; `/health` reports the lag.
        #[arg(long)]
        replica: bool,
        /// With `--replica`: JSON-RPC URL of the node (repeat it for several providers); the
        /// Ethereum JSON-RPC endpoint at `POST /` answers the contract's views from the replica
        /// and forwards the rest here.
        #[arg(long)]
        rpc: Vec<String>,
        /// With `--replica` and `--rpc`: address of the membership contract.
        #[arg(long)]
        contract: Option<String>,
        /// A TOML config file (see `canopy config --print-default`).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Follows a membership contract (WakuRlnV2's interface) on an Ethereum node: state sync,
    /// then every block with its checkpoint in one commit, roots checked against `root()`,
    /// reorgs rewound. Runs until SIGINT/SIGTERM (or, with `--once`, until caught up). Every
    /// flag can also come from `--config FILE` or a `CANOPY_*` variable.
    Follow {
        /// JSON-RPC URL of the node (http or https); repeat it for several providers of one
        /// chain (reads fail over between them).
        #[arg(long)]
        rpc: Vec<String>,
        /// How many providers must agree on each block's hash and the contract's root before
        /// the block is committed (default 1).
        #[arg(long)]
        quorum: Option<usize>,
        /// Address of the membership contract.
        #[arg(long)]
        contract: Option<String>,
        /// Database directory or postgres:// URL, created when absent (default `canopy-db`).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Replay from this block (with `--sync replay`) or pin state sync at it.
        #[arg(long)]
        from_block: Option<u64>,
        /// Stay this many blocks behind the head (default 0).
        #[arg(long)]
        confirmations: Option<u64>,
        /// How an empty database is filled: `state` (the contract's leaves at one block) or
        /// `replay` (every event since deployment; needs an archive node).
        #[arg(long, value_parser = follow::sync_mode)]
        sync: Option<follower::SyncMode>,
        /// Serve the HTTP API (`/health`, `/ready`, `/metrics`, `/root`, `/roots`,
        /// `/proof/{index}`, `/verify`) here while following.
        #[arg(long)]
        serve: Option<std::net::SocketAddr>,
        /// With `--db postgres://…`: wait as a standby for the tree's writer lock, then follow
        /// (also `postgres.standby` in the config file).
        #[arg(long)]
        standby: bool,
        /// Stop once caught up with the head: exit 0 only when the target block was reached
        /// (3: the deadline passed first, 4: a signal came first, 1: a fatal error).
        #[arg(long)]
        once: bool,
        /// With `--once`, give up after this many seconds (node down, too slow), exit status 3.
        #[arg(long, default_value_t = 300)]
        once_timeout: u64,
        /// A TOML config file (see `canopy config --print-default`).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Shows the configuration `follow` and `serve` would run with (defaults, then `--config`,
    /// then `CANOPY_*` variables), or the commented default file.
    Config {
        /// Print the commented default configuration file.
        #[arg(long)]
        print_default: bool,
        /// A TOML config file to check and merge.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Verifies RLN proofs (JSON lines of `proof`, `y`, `root`, `nullifier`, `x`,
    /// `external_nullifier`, optional `signal`) against the tree's window of acceptable roots,
    /// in batches: one verdict per line, then a summary.
    Verify {
        /// Database directory or postgres:// URL (its root window is what proofs may use).
        #[arg(long)]
        db: PathBuf,
        /// The proofs file (`-` for stdin).
        file: PathBuf,
        /// The verifying key (compressed arkworks bytes; default: the key of zerokit's depth-20
        /// circuit).
        #[arg(long)]
        verifying_key: Option<PathBuf>,
    },
    /// Recomputes every stored node and reports mismatches.
    Check {
        /// Database directory or postgres:// URL.
        #[arg(long)]
        db: PathBuf,
    },
}

/// Why a command failed: one line for the user, the typed cause kept as its source.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The path holds no Canopy tree.
    #[error("no Canopy tree there (create one with `canopy init`)")]
    NoTree,
    /// The database refused or failed.
    #[error(transparent)]
    Store(tree_engines::DbTreeError),
    /// A tree rule refused the operation.
    #[error(transparent)]
    Tree(#[from] tree_core::TreeError),
    /// Committing a block failed.
    #[error(transparent)]
    Commit(#[from] follower::CommitError),
    /// The follower stopped on an error.
    #[error(transparent)]
    Follow(#[from] follower::FollowError),
    /// `follow --once` passed its deadline before reaching the target block.
    #[error("--once: {seconds} s passed at block {block:?} of target {target:?} (last error: {last_error})")]
    Deadline {
        /// The deadline, in seconds.
        seconds: u64,
        /// The last block applied.
        block: Option<u64>,
        /// The block it was heading for.
        target: Option<u64>,
        /// The last step's error, if any.
        last_error: String,
    },
    /// `follow --once` was stopped by a signal before reaching the target block.
    #[error("--once: stopped by a signal at block {block:?} before the target {target:?}")]
    Interrupted {
        /// The last block applied.
        block: Option<u64>,
        /// The block it was heading for.
        target: Option<u64>,
    },
    /// The index has no membership proof.
    #[error("{0}")]
    NotAMember(String),
    /// `rewind` to a block the window no longer (or never) held.
    #[error("unknown block {block} (oldest block that can be restored: {oldest:?})")]
    UnknownBlock {
        /// The block asked for.
        block: u64,
        /// The oldest block still restorable.
        oldest: Option<u64>,
    },
    /// A snapshot file that does not read.
    #[error("{path}: {source}")]
    Snapshot {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: tree_core::SnapshotError,
    },
    /// A snapshot that read but does not import into the database.
    #[error("{path}: {source}")]
    Import {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: tree_core::SnapshotError<tree_engines::DbTreeError>,
    },
    /// `check` found stored nodes that disagree with their children.
    #[error(
        "{count} stored nodes disagree with their children (first at level {level}, index {index})"
    )]
    Integrity {
        /// How many.
        count: usize,
        /// The first one's level.
        level: u8,
        /// The first one's index.
        index: u64,
    },
    /// The RLN witness or proof of the demo failed (zerokit's prover or our verifier).
    #[error("rln: {0}")]
    Rln(#[source] Box<dyn std::error::Error + Send + Sync>),
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
    /// A bad or missing setting (from a flag, the config file or the environment).
    #[error("config: {0}")]
    Config(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<tree_engines::DbTreeError> for CliError {
    fn from(e: tree_engines::DbTreeError) -> Self {
        match e {
            tree_core::persistent::PersistentTreeError::NotATree => Self::NoTree,
            other => Self::Store(other),
        }
    }
}

impl CliError {
    /// The process exit status: 2 for usage and configuration, 3 for `--once` past its
    /// deadline, 4 for `--once` stopped by a signal, 1 for every other error.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Config(_) | Self::Follow(follower::FollowError::Config(_)) => 2,
            Self::Deadline { .. } => 3,
            Self::Interrupted { .. } => 4,
            _ => 1,
        }
    }

    /// An RLN library error, kept typed as the source.
    pub fn rln(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Rln(Box::new(e))
    }
}

/// What a command prints: a human text and the same as JSON.
pub struct Output {
    text: String,
    json: serde_json::Value,
}

/// The flags of `follow` and `serve` as a config layer: only what was given is set.
#[derive(Debug, Default, Serialize)]
struct FlagLayer {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rpc: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quorum: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    contract: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    db: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<std::net::SocketAddr>,
    log: LogFlags,
    follower: FollowerFlags,
    #[serde(skip_serializing_if = "PostgresFlags::is_empty")]
    postgres: PostgresFlags,
}

#[derive(Debug, Default, Serialize)]
struct PostgresFlags {
    #[serde(skip_serializing_if = "Option::is_none")]
    standby: Option<bool>,
}

impl PostgresFlags {
    fn is_empty(&self) -> bool {
        self.standby.is_none()
    }
}

#[derive(Debug, Default, Serialize)]
struct LogFlags {
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<LogFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    color: Option<ColorChoice>,
}

#[derive(Debug, Default, Serialize)]
struct FollowerFlags {
    #[serde(skip_serializing_if = "Option::is_none")]
    from_block: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sync: Option<follower::SyncMode>,
}

/// The daemons' configuration and the log format of every command.
fn settings(cli: &Cli) -> Result<(Option<CanopyConfig>, config::LogConfig), CliError> {
    let log = LogFlags {
        format: cli.log_format,
        color: cli.color,
    };
    let (file, flags) = match &cli.command {
        Command::Demo { config, .. } => (
            config,
            FlagLayer {
                log,
                ..FlagLayer::default()
            },
        ),
        Command::Follow {
            rpc,
            quorum,
            contract,
            db,
            from_block,
            confirmations,
            sync,
            serve,
            config,
            standby,
            ..
        } => (
            config,
            FlagLayer {
                rpc: rpc.clone(),
                quorum: *quorum,
                contract: contract.clone(),
                db: db.clone(),
                tree: cli.tree.clone(),
                listen: *serve,
                log,
                follower: FollowerFlags {
                    from_block: *from_block,
                    confirmations: *confirmations,
                    sync: *sync,
                },
                postgres: PostgresFlags {
                    standby: standby.then_some(true),
                },
            },
        ),
        Command::Serve {
            db,
            listen,
            config,
            rpc,
            contract,
            ..
        } => (
            config,
            FlagLayer {
                rpc: rpc.clone(),
                contract: contract.clone(),
                db: db.clone(),
                tree: cli.tree.clone(),
                listen: *listen,
                log,
                ..FlagLayer::default()
            },
        ),
        Command::Config { config, .. } => (
            config,
            FlagLayer {
                log,
                ..FlagLayer::default()
            },
        ),
        _ => {
            let log = config::LogConfig {
                format: cli.log_format.unwrap_or_default(),
                color: cli.color.unwrap_or_default(),
                ..config::LogConfig::default()
            };
            return Ok((None, log));
        }
    };
    let config = config::load(file.as_deref(), &flags)?;
    let log = config.log.clone();
    Ok((Some(config), log))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, log) = match settings(&cli) {
        Ok(settings) => settings,
        Err(e) => return fail(&e),
    };
    // Retries, reorgs and progress are logged to stderr; RUST_LOG sets the level.
    telemetry::init_logs(log.format, log.color.enabled());
    if config.is_some() {
        for name in config::unknown_env_vars() {
            tracing::debug!(variable = %name, "not a configuration key: ignored");
        }
    }
    let tree = cli
        .tree
        .clone()
        .or_else(|| config.as_ref().map(|c| c.tree.clone()));
    let db = |path: PathBuf| {
        let mut db = ops::Db::new(path);
        if let Some(tree) = &tree {
            db.tree.clone_from(tree);
        }
        db
    };
    let result = match (cli.command, config) {
        (
            Command::Demo {
                db,
                members,
                blocks,
                engine,
                ..
            },
            config,
        ) => demo::run(
            db,
            members,
            blocks,
            engine,
            &config.unwrap_or_default(),
            cli.json,
        ),
        (
            Command::Init {
                db: path,
                depth,
                engine,
            },
            _,
        ) => ops::init(&db(path), depth, engine),
        (Command::Apply { db: path, events }, _) => ops::apply(&db(path), &events),
        (Command::Root { db: path }, _) => ops::root(&db(path)),
        (Command::Proof { db: path, index }, _) => ops::proof(&db(path), index),
        (Command::Rewind { db: path, block }, _) => ops::rewind(&db(path), block),
        (Command::Export { db: path, file }, _) => ops::export(&db(path), &file),
        (
            Command::Import {
                db: path,
                file,
                expect_root,
                engine,
            },
            _,
        ) => ops::import(&db(path), &file, expect_root.as_deref(), engine),
        (
            Command::Serve {
                events, replica, ..
            },
            Some(config),
        ) => serve::run(&config, events, replica),
        (
            Command::Follow {
                once, once_timeout, ..
            },
            Some(config),
        ) => follow::run(&config, once.then(|| Duration::from_secs(once_timeout))),
        (Command::Config { print_default, .. }, Some(config)) => Ok(if print_default {
            Output {
                text: config::DEFAULT_TOML.trim_end().to_owned(),
                json: serde_json::json!({"default": config::DEFAULT_TOML}),
            }
        } else {
            let json = serde_json::to_value(&config).unwrap_or_default();
            Output {
                text: serde_json::to_string_pretty(&json).unwrap_or_default(),
                json,
            }
        }),
        (Command::Serve { .. } | Command::Follow { .. } | Command::Config { .. }, None) => {
            Err(CliError::Usage("no configuration".into()))
        }
        (Command::Check { db: path }, _) => ops::check(&db(path)),
        (
            Command::Verify {
                db: path,
                file,
                verifying_key,
            },
            _,
        ) => verify::run(&db(path), &file, verifying_key.as_deref()),
    };
    match result {
        Ok(output) => {
            // A reader that went away (a closed pipe) is not a failure of the command.
            let mut stdout = std::io::stdout().lock();
            let _ = if cli.json {
                writeln!(stdout, "{}", output.json)
            } else if !output.text.is_empty() {
                writeln!(stdout, "{}", output.text)
            } else {
                Ok(())
            };
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &CliError) -> ExitCode {
    // A closed stderr is no reason to panic: the exit status still says it.
    let _ = writeln!(std::io::stderr(), "error: {e}");
    ExitCode::from(e.exit_code())
}
