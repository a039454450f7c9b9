//! The connection pool of one handle, bound to one namespace, and the runtime that drives it.
//!
//! `tokio-postgres` connections are tokio tasks. So that a [`PgStore`](super::PgStore) works
//! from any caller (a plain thread, `compaction::block_on`, tokio, another executor), every
//! operation runs as a task on one small tokio runtime this module owns, shared by all handles
//! in the process; the caller awaits the task's result on whatever executor it runs.

use super::error::{Cause, PgError, PgErrorKind, Redactor};
use super::schema;
use super::PgOptions;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use tokio_postgres::config::Host;
use tokio_postgres::{Config, NoTls};

/// The process-wide runtime, built on first use. Never shut down, so a handle dropped inside
/// any async context is fine, and tasks never see a cancelled runtime.
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("compaction-postgres")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the PostgreSQL client runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `task` on the backend's runtime; the returned future is its result, for any executor.
pub(crate) fn spawn<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = T> + Send {
    // `connect` started the runtime before any handle existed, so it is there.
    let handle = runtime()
        .expect("a handle exists only after the runtime started")
        .spawn(task);
    async move {
        match handle.await {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => unreachable!("the backend runtime is never shut down: {e}"),
        }
    }
}

/// One pool of connections to one database, for one namespace. Shared by a handle's clones.
pub(crate) struct Db {
    pool: Pool,
    target: String,
    namespace: String,
    redactor: Redactor,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("target", &self.target)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Parses `url`, builds the pool, makes one connection and brings the schema to
    /// [`SCHEMA_VERSION`](super::SCHEMA_VERSION) (refusing a newer one).
    pub(crate) async fn connect(
        url: &str,
        namespace: &str,
        options: &PgOptions,
    ) -> Result<Arc<Db>, PgError> {
        let (mut config, target) = parse(url).map_err(|e| e.in_namespace(namespace))?;
        let redactor = Redactor::of(&config);
        let error = |kind, detail: String| {
            PgError::new(
                &target,
                namespace,
                "connecting",
                Cause::Found(kind, detail),
                &redactor,
            )
        };
        check_namespace(namespace).map_err(|detail| error(PgErrorKind::Config, detail))?;
        runtime().map_err(|detail| error(PgErrorKind::Other, detail))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("compaction");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // A pooled connection the server dropped (restart, terminated backend) is
                // found by a round trip before it is handed out, not by the caller's write.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| error(PgErrorKind::Config, e.to_string()))?;
        let db = Arc::new(Db {
            pool,
            target,
            namespace: namespace.to_string(),
            redactor,
        });
        let migrating = Arc::clone(&db);
        spawn(async move {
            let mut client = migrating.client().await?;
            schema::migrate(&mut client).await
        })
        .await
        .map_err(|cause| db.error("opening the database and checking its schema", cause))?;
        Ok(db)
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object, Cause> {
        Ok(self.pool.get().await?)
    }

    /// The server and database, as `host:port/dbname`.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// The namespace every query of this handle is confined to.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A `PgError` for this server and namespace.
    pub(crate) fn error(&self, context: impl Into<String>, cause: Cause) -> PgError {
        PgError::new(
            &self.target,
            &self.namespace,
            context,
            cause,
            &self.redactor,
        )
    }
}

/// A namespace is any non-empty text up to 200 bytes without NUL (PostgreSQL text cannot hold
/// NUL). It is always sent as a bound parameter, never spliced into SQL.
fn check_namespace(namespace: &str) -> Result<(), String> {
    if namespace.is_empty() {
        return Err("the namespace is empty; every handle needs one (e.g. the tenant id)".into());
    }
    if namespace.len() > 200 {
        return Err(format!(
            "the namespace is {} bytes long; at most 200",
            namespace.len()
        ));
    }
    if namespace.contains('\0') {
        return Err("the namespace contains a NUL character".into());
    }
    Ok(())
}

/// What a connection string that could not be used is called in messages: it may hold the
/// password, so it is never shown itself.
const UNPARSED: &str = "<unparsed connection string>";

/// A connection string that does not parse, before a namespace is attached.
pub(crate) struct ParseError(String);

impl ParseError {
    fn in_namespace(self, namespace: &str) -> PgError {
        PgError::new(
            UNPARSED,
            namespace,
            "connecting",
            Cause::Found(PgErrorKind::Config, self.0),
            &Redactor::default(),
        )
    }
}

/// Parses a connection string with `tokio-postgres`' own parser, and names its server and
/// database (`host:port/dbname`) for messages.
///
/// A URL holds its user name and password before the first `@`; an `@` inside either must be
/// written `%40`. Written raw, the rest of the password reads as the host (in
/// `postgres://alice:p@ssw0rd@host/db` the host would be `ssw0rd@host`), and a message naming
/// the server would show it: such a URL is refused without naming anything. The parser's
/// own messages are not kept either (they may quote the string).
fn parse(url: &str) -> Result<(Config, String), ParseError> {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        // The whole string, not only what precedes a `?`: the parser splits the user info at
        // the first `@` even when a `?` (part of a password) comes before it.
        if url.matches('@').count() > 1 {
            return Err(ParseError(
                "the URL has more than one `@`: write an `@` inside a user name, password, \
                 database name or parameter as %40 (the string is not shown: it holds a \
                 password)"
                    .into(),
            ));
        }
    }
    let config: Config = url.parse().map_err(|_| {
        ParseError(
            "it is neither a postgres:// URL nor key=value pairs tokio-postgres can read (the \
             string is not shown: it may hold a password)"
                .into(),
        )
    })?;
    let target = describe(&config);
    Ok((config, target))
}

/// The server and database a connection string names, as `host:port/dbname`, without the
/// user name or the password: what [`PgError::target`], `PgStore::target` and
/// `PgLedger::target` show, available before connecting (for a tool's own messages).
///
/// ```
/// use compaction::postgres::target_of;
///
/// let target = target_of("postgres://agent:s3cret@db.internal:5433/fleet").unwrap();
/// assert_eq!(target, "db.internal:5433/fleet");
/// // Without a database name the server uses the user's name: it is not shown.
/// assert_eq!(target_of("postgres://agent@db.internal").unwrap(), "db.internal:5432/(default database)");
/// // An `@` inside the password must be %40; raw, the string is refused unshown.
/// assert!(target_of("postgres://agent:p@ss@db.internal/fleet").is_err());
/// ```
pub fn target_of(url: &str) -> Result<String, PgError> {
    parse(url)
        .map(|(_, target)| target)
        .map_err(|e| e.in_namespace(""))
}

/// `host:port/dbname` of a connection configuration: enough to find the server in a message,
/// without the user or the password. Without a database name the server connects to the one
/// named after the user: that is shown as `(default database)`, never as the user's name.
fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_string()
    } else {
        hosts.join(",")
    };
    let dbname = config.get_dbname().unwrap_or("(default database)");
    format!("{hosts}/{dbname}")
}
