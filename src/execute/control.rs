//! The proxy's own backend accesses, outside any client session: the readiness check, the
//! session defaults and server version it reads, the databases it learns, and `KILL`
//! (which must reach a backend thread even when every pooled connection is busy). They go
//! through one function, [`control_connection`], with a [`Target`] as a session's
//! accesses do ([`super::Transaction::connection`]).

use std::ops::{Deref, DerefMut};

use super::target::Target;
use crate::backend::{BackendConn, PooledConn, Pools};
use crate::config::Datasource;
use crate::error::ProxyError;

/// Where a control access takes its connection from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A pooled connection, waiting for one like a statement would.
    Pool,
    /// A pooled connection, or a connection of its own when every pooled one is busy (a
    /// hung server looks busy too).
    PoolUnlessBusy,
    /// A connection of its own, never the pool's (a `KILL` must not wait behind the
    /// statement it stops; a read that must not change a pooled connection's state).
    Own,
}

/// A connection for a control access: pooled (back to the pool when dropped) or its own
/// (closed when dropped; [`ControlConn::close`] says goodbye first).
pub enum ControlConn {
    /// From the pool.
    Pooled(PooledConn),
    /// Opened for this access (boxed: a connection is about 500 bytes).
    Own(Box<BackendConn>),
}

impl ControlConn {
    /// Ends the access: a pooled connection goes back to the pool, an own one is closed
    /// with COM_QUIT.
    pub async fn close(self) {
        match self {
            ControlConn::Pooled(conn) => drop(conn),
            ControlConn::Own(conn) => conn.quit().await,
        }
    }
}

impl Deref for ControlConn {
    type Target = BackendConn;

    fn deref(&self) -> &BackendConn {
        match self {
            ControlConn::Pooled(conn) => conn,
            ControlConn::Own(conn) => conn,
        }
    }
}

impl DerefMut for ControlConn {
    fn deref_mut(&mut self) -> &mut BackendConn {
        match self {
            ControlConn::Pooled(conn) => conn,
            ControlConn::Own(conn) => conn,
        }
    }
}

/// A connection to `member` of `target`'s datasource (`datasource`: its configuration, as
/// the caller's configuration snapshot has it; the member as the caller chose it from the
/// topology, 0 for a datasource of one server) for one of the proxy's own accesses, taken
/// as `source` says. `max_packet`: the largest packet the connection accepts (bytes).
///
/// # Errors
/// The datasource cannot be reached ([`ProxyError::Unavailable`]) or its pool has no
/// connection in time.
pub async fn control_connection(
    pools: &Pools,
    datasource: &Datasource,
    target: Target,
    member: usize,
    max_packet: usize,
    source: Source,
) -> Result<ControlConn, ProxyError> {
    let id = target.datasource;
    let own = match source {
        Source::Pool => false,
        Source::PoolUnlessBusy => pools.saturated(id, member),
        Source::Own => true,
    };
    if own {
        Ok(ControlConn::Own(Box::new(
            own_connection(datasource, target, member, max_packet).await?,
        )))
    } else {
        Ok(ControlConn::Pooled(pools.get(id, member, false).await?))
    }
}

/// A connection of its own to `member` of `target`'s datasource, outside every pool
/// (`KILL`, which has no pool at hand and must not wait for one, names the member the
/// statement went to).
///
/// # Errors
/// The member cannot be reached ([`ProxyError::Unavailable`]).
pub async fn own_connection(
    datasource: &Datasource,
    target: Target,
    member: usize,
    max_packet: usize,
) -> Result<BackendConn, ProxyError> {
    let mut conn = BackendConn::connect(
        &datasource.member(member),
        target.datasource,
        false,
        max_packet,
    )
    .await?;
    conn.set_member(member);
    Ok(conn)
}
