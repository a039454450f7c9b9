//! Where the typed agent's spilled state, checkpoints and effect ledger live: a SQLite file
//! (`--db PATH`) or, with the `postgres` feature, a namespace of a PostgreSQL database
//! (`--db postgres://...`, shared by a fleet of workers). Only the calls the agent makes. The
//! agent is synchronous: it runs the PostgreSQL handles' `async` methods to completion with
//! `compaction::block_on`.

#[cfg(feature = "postgres")]
use compaction::block_on;
use compaction::{
    Compacted, CompactorBuilder, Effect, EffectError, EffectLog, EffectStatus, SqliteLedger,
    SqliteStore,
};

type Error = Box<dyn std::error::Error>;

/// The store and ledger of one backend.
pub(crate) enum Durable {
    Sqlite {
        store: SqliteStore,
        ledger: SqliteLedger,
    },
    #[cfg(feature = "postgres")]
    Postgres {
        store: compaction::PgStore,
        ledger: compaction::PgLedger,
    },
}

/// How a claim (`begin`) ended.
pub(crate) enum Claim {
    /// This worker runs the effect.
    Won,
    /// It already ran (here, before a restart, or on another worker): do not run it again.
    AlreadyCommitted,
}

/// Whether `target` names a PostgreSQL database.
pub(crate) fn is_postgres(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `target` as it may be printed: a PostgreSQL URL becomes its server and database (parsed
/// by tokio-postgres, never split by hand), without the user name or password.
pub(crate) fn shown(target: &str) -> String {
    if !is_postgres(target) {
        return target.to_string();
    }
    #[cfg(feature = "postgres")]
    return compaction::postgres::target_of(target)
        .map(|server| format!("postgres `{server}`"))
        .unwrap_or_else(|_| "an unreadable postgres:// connection string".into());
    #[cfg(not(feature = "postgres"))]
    "a postgres:// database".into()
}

impl Durable {
    /// Opens the SQLite file `target`, or connects to the PostgreSQL database `target` in
    /// `namespace`.
    pub(crate) fn open(target: &str, namespace: &str) -> Result<Durable, Error> {
        if is_postgres(target) {
            #[cfg(feature = "postgres")]
            return Ok(Durable::Postgres {
                store: block_on(compaction::PgStore::connect(target, namespace))?,
                ledger: block_on(compaction::PgLedger::connect(target, namespace))?,
            });
            #[cfg(not(feature = "postgres"))]
            return Err(format!(
                "`--db postgres://...` needs the `postgres` feature: \
                 cargo run --example migration_agent --features postgres -- --db URL \
                 (namespace `{namespace}`)"
            )
            .into());
        }
        Ok(Durable::Sqlite {
            store: SqliteStore::open(target)?,
            ledger: SqliteLedger::open(target)?,
        })
    }

    /// A compactor builder that spills into this backend's store.
    pub(crate) fn builder(&self, builder: CompactorBuilder) -> CompactorBuilder {
        match self {
            Durable::Sqlite { store, .. } => builder.store(store.clone()),
            #[cfg(feature = "postgres")]
            Durable::Postgres { store, .. } => builder.store(store.clone()),
        }
    }

    pub(crate) fn save_checkpoint<S>(&self, agent: &str, c: &Compacted<S>) -> Result<(), Error> {
        match self {
            Durable::Sqlite { store, .. } => store.save_checkpoint(agent, c)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { store, .. } => block_on(store.save_checkpoint(agent, c))?,
        }
        Ok(())
    }

    pub(crate) fn load_checkpoint<S>(&self, agent: &str) -> Result<Option<Compacted<S>>, Error> {
        Ok(match self {
            Durable::Sqlite { store, .. } => store.load_checkpoint(agent)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { store, .. } => block_on(store.load_checkpoint(agent))?,
        })
    }

    pub(crate) fn record(&self, effect: &Effect) -> Result<(), Error> {
        match self {
            Durable::Sqlite { ledger, .. } => ledger.record(effect)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => block_on(ledger.record(effect))?,
        }
        Ok(())
    }

    /// Claims `key`: exactly one caller wins, across processes (and machines on PostgreSQL).
    pub(crate) fn begin(&self, key: &str) -> Result<Claim, Error> {
        let refusal = match self {
            Durable::Sqlite { ledger, .. } => match ledger.begin(key) {
                Ok(()) => return Ok(Claim::Won),
                Err(e) => (e.as_effect().cloned(), Error::from(e)),
            },
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => match block_on(ledger.begin(key)) {
                Ok(()) => return Ok(Claim::Won),
                Err(e) => (e.as_effect().cloned(), Error::from(e)),
            },
        };
        match refusal {
            (Some(EffectError::AlreadyCommitted { .. }), _) => Ok(Claim::AlreadyCommitted),
            (_, error) => Err(error),
        }
    }

    pub(crate) fn commit(&self, key: &str) -> Result<(), Error> {
        match self {
            Durable::Sqlite { ledger, .. } => ledger.commit(key)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => block_on(ledger.commit(key))?,
        }
        Ok(())
    }

    pub(crate) fn reconcile(&self, key: &str, status: EffectStatus) -> Result<(), Error> {
        match self {
            Durable::Sqlite { ledger, .. } => ledger.reconcile(key, status)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => block_on(ledger.reconcile(key, status))?,
        }
        Ok(())
    }

    pub(crate) fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, Error> {
        Ok(match self {
            Durable::Sqlite { ledger, .. } => ledger.list(status)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => block_on(ledger.list(status))?,
        })
    }

    pub(crate) fn load_log(&self, scope: &str) -> Result<EffectLog, Error> {
        Ok(match self {
            Durable::Sqlite { ledger, .. } => ledger.load_log(scope)?,
            #[cfg(feature = "postgres")]
            Durable::Postgres { ledger, .. } => block_on(ledger.load_log(scope))?,
        })
    }
}
