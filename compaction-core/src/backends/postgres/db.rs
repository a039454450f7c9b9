//! The connection pool of one handle, bound to one namespace, and the runtime that drives it.
//!
//! `tokio-postgres` connections are tokio tasks. So that a [`PgStore`](super::PgStore) works
//! from any caller (a plain thread, `compaction::block_on`, tokio, another executor), every
//! operation runs as a task on one small tokio runtime this module owns, shared by all handles
//! in the process; the caller waits for the task's result (blocking methods) or awaits it
//! (the async `Store` methods).

use super::error::{Cause, PgError, PgErrorKind};
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

/// Runs `task` on the backend's runtime and blocks the calling thread until it is done.
pub(crate) fn wait<T: Send + 'static>(task: impl Future<Output = T> + Send + 'static) -> T {
    crate::future::block_on(spawn(task))
}

/// One pool of connections to one database, for one namespace. Shared by a handle's clones.
pub(crate) struct Db {
    pool: Pool,
    target: String,
    namespace: String,
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
    pub(crate) fn connect(
        url: &str,
        namespace: &str,
        options: &PgOptions,
    ) -> Result<Arc<Db>, PgError> {
        let config_error = |target: &str, detail: String| {
            PgError::new(
                target,
                namespace,
                "connecting",
                Cause::Found(PgErrorKind::Config, detail),
            )
        };
        let mut config: Config = url
            .parse()
            .map_err(|e| config_error("<unparsed connection string>", format!("{e}")))?;
        let target = describe(&config);
        check_namespace(namespace).map_err(|detail| config_error(&target, detail))?;
        runtime().map_err(|detail| {
            PgError::new(
                &target,
                namespace,
                "connecting",
                Cause::Found(PgErrorKind::Other, detail),
            )
        })?;
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
            .map_err(|e| config_error(&target, e.to_string()))?;
        let db = Arc::new(Db {
            pool,
            target,
            namespace: namespace.to_string(),
        });
        let migrating = Arc::clone(&db);
        wait(async move {
            let mut client = migrating.client().await?;
            schema::migrate(&mut client).await
        })
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
        PgError::new(&self.target, &self.namespace, context, cause)
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

/// `host:port/dbname` of a connection configuration: enough to find the server in a message,
/// without the user or the password.
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
    let dbname = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{hosts}/{dbname}")
}
