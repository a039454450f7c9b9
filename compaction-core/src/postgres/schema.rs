//! The tables of the PostgreSQL backend and their migrations, serialized across processes.

use super::error::{Cause, PgErrorKind};
use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;

/// The schema version this crate writes. Connecting to a database with a lower version
/// migrates it (in one transaction, one process at a time); a higher version is refused with
/// [`PgErrorKind::Schema`].
pub const SCHEMA_VERSION: i32 = 5;

/// Key of the advisory lock that serializes migrations of one database across processes.
const MIGRATION_LOCK: i64 = 0x636f_6d70_6163_7431; // "compact1"

/// The migrations, in order: `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
/// Every table is keyed by `namespace` first: a handle only ever names its own.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "blobs, checkpoints, effects and their append-only event history, per namespace",
        r#"
    -- The server's clock, in ms since the Unix epoch: one clock for every machine of a fleet.
    CREATE FUNCTION compaction.now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE
        AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
    CREATE TABLE compaction.blobs (
        namespace     TEXT   NOT NULL,
        hash          TEXT   NOT NULL,   -- 64 lowercase hex digits of SHA-256(bytes)
        bytes         BYTEA  NOT NULL,
        size          BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (namespace, hash)
    );
    CREATE TABLE compaction.checkpoints (
        namespace   TEXT   NOT NULL,
        agent_id    TEXT   NOT NULL,
        state_type  TEXT   NOT NULL,
        json        TEXT   NOT NULL,     -- serde_json of Compacted<S>
        sha256      TEXT   NOT NULL,     -- hex SHA-256 of json
        saved_at_ms BIGINT NOT NULL,
        PRIMARY KEY (namespace, agent_id)
    );
    CREATE TABLE compaction.effects (
        id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- record order
        namespace     TEXT   NOT NULL,
        scope         TEXT   NOT NULL,                                  -- the #[effect] field's
        key           TEXT   NOT NULL,                                  -- idempotency key
        action        TEXT   NOT NULL DEFAULT '',
        target        TEXT   NOT NULL DEFAULT '',
        status        TEXT   NOT NULL CHECK (status IN ('not_started', 'committed', 'unknown')),
        depends_on    TEXT   NOT NULL DEFAULT '[]',                     -- JSON array of keys
        payload       TEXT,                                             -- JSON, or NULL
        updated_at_ms BIGINT NOT NULL,
        UNIQUE (namespace, scope, key)
    );
    CREATE INDEX effects_in_order ON compaction.effects (namespace, scope, id);
    CREATE TABLE compaction.effect_events (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        namespace   TEXT   NOT NULL,
        scope       TEXT   NOT NULL,
        key         TEXT   NOT NULL,
        op          TEXT   NOT NULL,     -- record, begin, commit, fail, reconcile, sync
        from_status TEXT,                -- NULL when the key was new
        to_status   TEXT   NOT NULL,
        at_ms       BIGINT NOT NULL,
        pid         BIGINT NOT NULL
    );
    CREATE INDEX effect_events_by_key ON compaction.effect_events (namespace, scope, key, id);
    -- The history is append-only: the database itself refuses to change or delete an event.
    CREATE FUNCTION compaction.refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'compaction.effect_events is append-only';
    END $$;
    CREATE TRIGGER effect_events_append_only
        BEFORE UPDATE OR DELETE OR TRUNCATE ON compaction.effect_events
        FOR EACH STATEMENT EXECUTE FUNCTION compaction.refuse_event_change();
    "#,
    ),
    (
        "named entries beside the blobs (the summary cache), per namespace",
        r#"
    CREATE TABLE compaction.entries (
        namespace     TEXT   NOT NULL,
        name          TEXT   NOT NULL,
        bytes         BYTEA  NOT NULL,   -- verified by whoever reads it
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (namespace, name)
    );
    "#,
    ),
    (
        "operator notes: who settled an effect and why (reconcile with a note)",
        r#"
    ALTER TABLE compaction.effect_events
        ADD COLUMN actor TEXT,   -- who, for an operator's reconcile
        ADD COLUMN note  TEXT;   -- why: what they checked
    "#,
    ),
    (
        "the newest checkpoint sequence of each agent, forward only (rollback refusal)",
        r#"
    CREATE TABLE compaction.checkpoint_sequences (
        namespace     TEXT   NOT NULL,
        agent_id      TEXT   NOT NULL,
        sequence      BIGINT NOT NULL CHECK (sequence >= 0),
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (namespace, agent_id)
    );
    -- Forward only in the database itself: no update moves a sequence back or to another
    -- agent, and no row is deleted.
    CREATE FUNCTION compaction.refuse_sequence_rollback() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND NEW.sequence >= OLD.sequence
           AND NEW.namespace = OLD.namespace AND NEW.agent_id = OLD.agent_id THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'compaction.checkpoint_sequences: a checkpoint sequence goes forward only';
    END $$;
    CREATE TRIGGER checkpoint_sequences_forward_only
        BEFORE UPDATE OR DELETE ON compaction.checkpoint_sequences
        FOR EACH ROW EXECUTE FUNCTION compaction.refuse_sequence_rollback();
    CREATE TRIGGER checkpoint_sequences_not_truncated
        BEFORE TRUNCATE ON compaction.checkpoint_sequences
        FOR EACH STATEMENT EXECUTE FUNCTION compaction.refuse_sequence_rollback();
    "#,
    ),
    (
        "fencing: each agent's newest epoch, forward only (one writer per agent)",
        // An agent with a checkpoint but no row here (saved before this version) gets its row
        // when its next session opens, and is fenced from then on.
        r#"
    CREATE TABLE compaction.agent_fences (
        namespace     TEXT   NOT NULL,
        agent_id      TEXT   NOT NULL,
        epoch         BIGINT NOT NULL CHECK (epoch >= 0),
        renewed_at_ms BIGINT NOT NULL,   -- the server's clock (compaction.now_ms())
        PRIMARY KEY (namespace, agent_id)
    );
    -- Forward only in the database itself: no update moves an epoch back or to another agent,
    -- and no row is deleted (the next open would start over at epoch 1, and a stale session
    -- holding epoch 1 would pass its checks again).
    CREATE FUNCTION compaction.refuse_epoch_rollback() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND NEW.epoch >= OLD.epoch
           AND NEW.namespace = OLD.namespace AND NEW.agent_id = OLD.agent_id THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'compaction.agent_fences: an epoch goes forward only';
    END $$;
    CREATE TRIGGER agent_fences_forward_only
        BEFORE UPDATE OR DELETE ON compaction.agent_fences
        FOR EACH ROW EXECUTE FUNCTION compaction.refuse_epoch_rollback();
    CREATE TRIGGER agent_fences_not_truncated
        BEFORE TRUNCATE ON compaction.agent_fences
        FOR EACH STATEMENT EXECUTE FUNCTION compaction.refuse_epoch_rollback();
    "#,
    ),
];

/// The applied version: 0 when the schema or its version table does not exist yet.
async fn read_version(client: &impl GenericClient) -> Result<i32, Cause> {
    match client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM compaction.schema_version",
            &[],
        )
        .await
    {
        Ok(row) => Ok(row.try_get(0)?),
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
        {
            Ok(0)
        }
        Err(e) => Err(e.into()),
    }
}

fn too_new(found: i32) -> Cause {
    Cause::Found(
        PgErrorKind::Schema,
        format!(
            "the database has schema version {found}, this version supports up to \
             {SCHEMA_VERSION}; upgrade the crate"
        ),
    )
}

/// Brings the schema to [`SCHEMA_VERSION`], or refuses a newer one.
pub(crate) async fn migrate(client: &mut deadpool_postgres::Object) -> Result<(), Cause> {
    // Most connects find the schema current: check with a read, taking no lock.
    let found = read_version(&*client).await?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    let tx = client.transaction().await?;
    // Other processes connecting at the same moment wait here, then find the work done.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS compaction;
         CREATE TABLE IF NOT EXISTS compaction.schema_version (
             version       INTEGER PRIMARY KEY,
             applied_at_ms BIGINT  NOT NULL,
             description   TEXT    NOT NULL
         );",
    )
    .await?;
    let found = read_version(&tx).await?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for (index, (description, sql)) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO compaction.schema_version (version, applied_at_ms, description)
             VALUES ($1, compaction.now_ms(), $2)",
            &[&(index as i32 + 1), description],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
