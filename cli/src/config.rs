//! The daemon's configuration: one typed struct, filled in layers — built-in defaults, then a
//! TOML file (`--config FILE`), then `CANOPY_*` environment variables, then command-line flags.
//! Every struct denies unknown fields, so a misspelt key is an error that names it and where it
//! came from, never a setting silently ignored.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use follower::FollowerConfig;
use serde::{Deserialize, Serialize};

use crate::CliError;

/// Everything `canopy follow` and `canopy serve` can be told.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CanopyConfig {
    /// JSON-RPC URLs of the Ethereum node(s) (`follow`): one, or several providers of one chain
    /// that reads fail over between (a string or a list).
    #[serde(deserialize_with = "one_or_many")]
    pub rpc: Vec<String>,
    /// How many providers must agree on each block's hash and the contract's root before it is
    /// committed (1 to the number of providers).
    pub quorum: usize,
    /// Address of the membership contract (`follow`).
    pub contract: Option<String>,
    /// Database directory, or a `postgres://` URL.
    pub db: PathBuf,
    /// The tree, when `db` is a PostgreSQL database (each name is its own tree there).
    pub tree: String,
    /// Where the HTTP API listens: `follow` serves only when this is set, `serve` defaults to
    /// 127.0.0.1:8645.
    pub listen: Option<SocketAddr>,
    /// Logging.
    pub log: LogConfig,
    /// The chain follower.
    pub follower: FollowerConfig,
    /// The HTTP API.
    pub server: ServerConfig,
    /// The Ethereum JSON-RPC endpoint at `POST /` of `follow --serve`.
    pub jsonrpc: eth_endpoint::EndpointConfig,
    /// A PostgreSQL database (`db = "postgres://…"`): standby, lease, reconnects, replicas.
    pub postgres: PostgresConfig,
    /// The RLN prover of `demo`: its tables' memory budget (`table_budget_bytes`, default
    /// 16 MiB; 0 keeps the bases alone) and arithmetic (`auto`, `portable`, `ifma`).
    #[cfg(feature = "rln")]
    pub prover: rln_glue::proving::ProverConfig,
}

/// How `follow` and `serve` hold a tree in a PostgreSQL database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresConfig {
    /// `follow` as a standby: wait for the tree's writer lock instead of failing, then follow.
    pub standby: bool,
    /// The writer's lease (ms): a writer silent this long loses its session and its lock.
    pub lease_ms: u64,
    /// How long a lost connection is retried (ms) before the command fails.
    pub reconnect_ms: u64,
    /// A replica (`serve --replica`) listens for the writer's commit notifications (LISTEN on
    /// the primary) and looks for new commits as each lands.
    pub listen: bool,
    /// How often a replica looks for new commits (ms) while notifications do not reach it: not
    /// listening, not yet connected, or on a hot standby (which refuses LISTEN).
    pub replica_poll_ms: u64,
    /// How often a listening replica looks anyway (ms): a safety net for a notification lost
    /// with a connection.
    pub replica_listen_poll_ms: u64,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        let pg = tree_engines::PostgresOptions::default();
        Self {
            standby: false,
            lease_ms: pg.lease_ms,
            reconnect_ms: pg.reconnect_ms,
            listen: pg.listen,
            replica_poll_ms: 20,
            replica_listen_poll_ms: 1000,
        }
    }
}

impl CanopyConfig {
    /// The engine configuration of `db` (with `tree` and the `[postgres]` settings).
    #[must_use]
    pub fn db_config(&self) -> tree_engines::DbConfig {
        let pg = &self.postgres;
        tree_engines::DbConfig::new(&self.db).postgres(tree_engines::PostgresOptions {
            tree: self.tree.clone(),
            lock_wait: if pg.standby {
                tree_postgres::LockWait::Wait
            } else {
                tree_postgres::LockWait::Fail
            },
            lease_ms: pg.lease_ms,
            reconnect_ms: pg.reconnect_ms,
            listen: pg.listen,
            ..tree_engines::PostgresOptions::default()
        })
    }
}

impl Default for CanopyConfig {
    fn default() -> Self {
        Self {
            rpc: Vec::new(),
            quorum: 1,
            contract: None,
            db: PathBuf::from("canopy-db"),
            tree: "default".to_owned(),
            listen: None,
            log: LogConfig::default(),
            follower: FollowerConfig::default(),
            server: ServerConfig::default(),
            jsonrpc: eth_endpoint::EndpointConfig::default(),
            postgres: PostgresConfig::default(),
            #[cfg(feature = "rln")]
            prover: rln_glue::proving::ProverConfig::default(),
        }
    }
}

/// How log lines are written (to stderr; the level comes from `RUST_LOG`, default `info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `text` for people, `json` (one object per line) for log collectors.
    pub format: LogFormat,
    /// Seconds between the info-level summary lines of `follow` (blocks, members, rate).
    pub summary_interval_secs: u64,
    /// ANSI colours in text logs: `auto` (only when stderr is a terminal), `always`, `never`.
    pub color: ColorChoice,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            summary_interval_secs: 10,
            color: ColorChoice::Auto,
        }
    }
}

/// The log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// When log lines carry ANSI colour escapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ColorChoice {
    /// Only when stderr is a terminal: files, pipes and journald get plain text.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether to colour lines written to stderr.
    #[must_use]
    pub fn enabled(self) -> bool {
        use std::io::IsTerminal;
        match self {
            Self::Auto => std::io::stderr().is_terminal(),
            Self::Always => true,
            Self::Never => false,
        }
    }
}

/// One URL or a list of them (`rpc = "http://…"` or `rpc = ["http://…", "https://…"]`).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(url) => vec![url],
        OneOrMany::Many(urls) => urls,
    })
}

/// Limits and health rules of the HTTP API: what a public endpoint needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Largest request body accepted (bytes), `POST /verify` aside; larger gets 413.
    pub max_body_bytes: usize,
    /// Largest `POST /verify` body (bytes; a batch of proofs); larger gets 413.
    pub max_verify_body_bytes: usize,
    /// Largest JSON-RPC body at `POST /` (bytes; a batch of calls); larger gets 413.
    pub max_jsonrpc_body_bytes: usize,
    /// Most proofs in one `POST /verify` batch; more gets 413.
    pub max_verify_batch: usize,
    /// A request not answered within this many milliseconds gets 503.
    pub request_timeout_ms: u64,
    /// Requests handled at once; beyond it requests are shed with 503 at once, not queued.
    pub max_concurrent_requests: usize,
    /// Requests of one client address handled at once; beyond it its requests get 429 at once,
    /// so one client cannot take the whole server. 0 (the default): no per-client cap (behind
    /// a reverse proxy every client has the proxy's address).
    pub max_concurrent_per_client: usize,
    /// Open connections at once; beyond it new ones are closed on accept.
    pub max_connections: usize,
    /// Time a connection may take to send a request's headers, and may stay idle between
    /// requests (milliseconds); then it is closed.
    pub header_read_timeout_ms: u64,
    /// RLN proof verifications (`POST /verify`, CPU-heavy) run at once on their own
    /// lowest-priority threads, so floods cannot starve `/proof`.
    pub max_concurrent_verifications: usize,
    /// How long a `/verify` waits for a verifier thread before it is answered 429 (ms).
    pub verify_wait_ms: u64,
    /// `/health` answers 503 while the follower is more than this many blocks behind its target.
    pub max_lag_blocks: u64,
    /// After SIGINT/SIGTERM, how long the current block and open requests may take before the
    /// process exits anyway (milliseconds).
    pub shutdown_timeout_ms: u64,
    /// The RLN verifying key for `/verify` (compressed arkworks bytes); none means the key of
    /// zerokit's depth-20 circuit.
    pub verifying_key: Option<PathBuf>,
    /// Origins whose browser pages may call the API (CORS: `Access-Control-Allow-Origin`, the
    /// `OPTIONS` preflight), e.g. a js-waku app's; `["*"]` allows any. Empty (the default):
    /// no CORS headers, so browsers refuse cross-origin calls.
    pub cors_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 * 1024,
            max_verify_body_bytes: 1024 * 1024,
            max_jsonrpc_body_bytes: 256 * 1024,
            max_verify_batch: 1024,
            request_timeout_ms: 10_000,
            max_concurrent_requests: 1_024,
            max_concurrent_per_client: 0,
            max_connections: 4_096,
            header_read_timeout_ms: 10_000,
            max_concurrent_verifications: 1,
            verify_wait_ms: 1_000,
            max_lag_blocks: 5,
            cors_origins: Vec::new(),
            shutdown_timeout_ms: 10_000,
            verifying_key: None,
        }
    }
}

/// The commented default configuration `canopy config --print-default` writes; a test checks
/// it parses to exactly [`CanopyConfig::default`].
pub const DEFAULT_TOML: &str = include_str!("default-config.toml");

/// Environment variables are `CANOPY_` plus the key, nested keys joined by `__`
/// (`CANOPY_FOLLOWER__CONFIRMATIONS=3`). Other `CANOPY_*` variables are left to other tools.
const ENV_PREFIX: &str = "CANOPY_";

/// Reads the configuration: defaults, then `file`, then the environment, then `flags` (a
/// partial config of the flags given on the command line).
///
/// # Errors
/// [`CliError::Config`] naming the key and its source: an unknown key, a value of the wrong
/// type, a missing or unreadable file.
pub fn load(file: Option<&Path>, flags: &impl Serialize) -> Result<CanopyConfig, CliError> {
    let mut figment = Figment::from(Serialized::defaults(CanopyConfig::default()));
    if let Some(file) = file {
        if !file.is_file() {
            return Err(CliError::Config(format!(
                "config file {} does not exist",
                file.display()
            )));
        }
        figment = figment.merge(Toml::file_exact(file));
    }
    let known = known_env_keys();
    figment = figment
        .merge(
            // Filtered before the split, while the key still reads like the variable.
            Env::prefixed(ENV_PREFIX)
                .filter(move |key| known.iter().any(|k| key.as_str().eq_ignore_ascii_case(k)))
                .split("__"),
        )
        .merge(Serialized::defaults(flags));
    figment.extract().map_err(|e| {
        CliError::Config(
            e.into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
}

/// `CANOPY_*` variables that are not configuration keys (so they are ignored): worth a warning,
/// since a misspelt variable would otherwise change nothing silently.
pub fn unknown_env_vars() -> Vec<String> {
    let known = known_env_keys();
    std::env::vars()
        .filter_map(|(name, _)| {
            let key = name.strip_prefix(ENV_PREFIX)?.to_lowercase();
            (!known.contains(&key)).then_some(name)
        })
        .collect()
}

/// Every key of the configuration as an environment variable suffix, lowercase, nested keys
/// joined by `__` (figment's own spelling of the variable's key).
fn known_env_keys() -> Vec<String> {
    let mut keys = Vec::new();
    if let Ok(serde_json::Value::Object(map)) = serde_json::to_value(CanopyConfig::default()) {
        collect_keys(&map, "", &mut keys);
    }
    keys
}

fn collect_keys(
    map: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    out: &mut Vec<String>,
) {
    for (key, value) in map {
        let full = format!("{prefix}{key}");
        if let serde_json::Value::Object(inner) = value {
            collect_keys(inner, &format!("{full}__"), out);
        } else {
            out.push(full);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct NoFlags {}

    #[test]
    fn the_printed_default_file_is_the_default() {
        let parsed: CanopyConfig = Figment::from(Toml::string(DEFAULT_TOML)).extract().unwrap();
        assert_eq!(parsed, CanopyConfig::default());
    }

    #[test]
    fn every_key_of_the_default_file_is_documented() {
        // Each `key = value` line follows a comment saying what it is.
        let lines: Vec<&str> = DEFAULT_TOML.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim_start_matches("# ").trim();
            if line.contains(" = ") && !line.starts_with('#') {
                let before = lines[..i].iter().rev().find(|l| !l.trim().is_empty());
                assert!(
                    before.is_some_and(|l| l.trim_start().starts_with('#')),
                    "line {} ({line}) has no comment above it",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("canopy.toml");
        std::fs::write(&file, "[follower]\nconfirmatons = 3\n").unwrap();
        let e = load(Some(&file), &NoFlags {}).unwrap_err().to_string();
        assert!(e.contains("confirmatons"), "{e}");
        assert!(e.contains("canopy.toml"), "{e}");
        std::fs::write(&file, "[server]\nmax_lag_blocks = \"many\"\n").unwrap();
        let e = load(Some(&file), &NoFlags {}).unwrap_err().to_string();
        assert!(e.contains("max_lag_blocks"), "{e}");
        let e = load(Some(&dir.path().join("absent.toml")), &NoFlags {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn env_keys_cover_nested_settings() {
        let keys = known_env_keys();
        for key in [
            "db",
            "follower__confirmations",
            "server__max_lag_blocks",
            "log__format",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
        }
    }
}
