//! The durable backends, one folder each behind its cargo feature: the blob [`Store`], the
//! [`EffectLedger`] and the [`CheckpointStore`] of one database.
//!
//! - [`sqlite`] (feature `sqlite`, on by default): one embedded file, nothing to install.
//! - [`postgres`] (feature `postgres`): a shared server, one namespace per tenant.
//!
//! A backend lives in its own folder here and joins the conformance suites (`tests/conformance_*.rs`)
//! with one line each; what else a new one touches is listed in the README's "Where to add".
//!
//! [`Store`]: crate::store::Store
//! [`EffectLedger`]: crate::effects::EffectLedger
//! [`CheckpointStore`]: crate::checkpoint::CheckpointStore

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite;
