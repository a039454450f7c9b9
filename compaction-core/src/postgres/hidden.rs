//! Bound parameters that never reach a log.
//!
//! `tokio-postgres` writes the `Debug` of every bound parameter to the `log` facade at DEBUG
//! (target `tokio_postgres::query`): with any `log` backend enabled at debug, every effect key
//! and target, every agent id and every spilled value would be in the application's logs. The
//! backend binds each parameter through [`Hidden`], whose `Debug` is `<hidden>`, so the client
//! logs that the statement ran and never what it carried. The SQL texts it also logs
//! (`preparing query ...`) are this crate's constants, which hold no value.

use bytes::BytesMut;
use std::error::Error;
use std::fmt;
use tokio_postgres::types::{Format, IsNull, ToSql, Type};

/// One bound parameter, encoded as its value and printed as `<hidden>`.
pub(crate) struct Hidden<'a>(pub(crate) &'a (dyn ToSql + Sync));

impl fmt::Debug for Hidden<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

impl ToSql for Hidden<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.to_sql_checked(ty, out)
    }

    /// The wrapped value checks its own type when it is encoded ([`to_sql_checked`]
    /// delegates), so the wrapper accepts every type.
    ///
    /// [`to_sql_checked`]: ToSql::to_sql_checked
    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.to_sql_checked(ty, out)
    }

    fn encode_format(&self, ty: &Type) -> Format {
        self.0.encode_format(ty)
    }
}

/// The parameter slice of a query, every value behind [`Hidden`]:
/// `client.query(&stmt, hidden![namespace, key]).await`.
macro_rules! hidden {
    ($($param:expr),* $(,)?) => {
        &[$(&$crate::postgres::hidden::Hidden(&$param)
            as &(dyn tokio_postgres::types::ToSql + Sync)),*]
    };
}
pub(crate) use hidden;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_value_prints_as_hidden_and_encodes_as_itself() {
        let secret = "charge-7 for cus_42";
        let hidden = Hidden(&secret);
        assert_eq!(format!("{hidden:?}"), "<hidden>");
        let params: &[&(dyn ToSql + Sync)] = hidden![secret, 7i64];
        assert_eq!(format!("{params:?}"), "[<hidden>, <hidden>]");
        let (mut plain, mut wrapped) = (BytesMut::new(), BytesMut::new());
        secret.to_sql_checked(&Type::TEXT, &mut plain).unwrap();
        hidden.to_sql_checked(&Type::TEXT, &mut wrapped).unwrap();
        assert_eq!(plain, wrapped);
        // The wrapped value still refuses a type it cannot be.
        assert!(hidden.to_sql_checked(&Type::INT8, &mut wrapped).is_err());
    }
}
