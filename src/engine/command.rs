//! The protocol commands, the table of contents of a session: each `COM_*` command to the
//! handling it gets (`COM_QUERY` to [`Session::query`], the `COM_STMT_*` family to the
//! prepared statements, ...), and the login's last step ([`welcome`]). An error a command
//! returns becomes the client's ERR packet here.

use mysql_common::constants::{CapabilityFlags, Command};

use super::session::Session;
use crate::error::{ER_UNKNOWN_COM_ERROR, ProxyError};
use crate::execute::Target;
use crate::protocol::packets::{OkInfo, eof_packet};
use crate::protocol::status::MoreResults;
use crate::wire::client::Client;

/// What the command loop does after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Read the next command.
    Continue,
    /// The client sent COM_QUIT: close the connection.
    Quit,
}

/// The login's last step: the database asked for at connect (1044 outside the user's
/// scope), then OK. `false` when the connection ends here (the error has been sent).
pub async fn welcome(session: &mut Session, client: &mut Client, database: Option<&str>) -> bool {
    let welcome = match database {
        Some(db) => session.select_database(db).await,
        None => Ok(()),
    };
    let welcome = match welcome {
        Ok(()) => session.apply_ignore_space().await,
        Err(e) => Err(e),
    };
    let sent = match welcome {
        Ok(()) => client.ok(&OkInfo {
            status: session.status(),
            session_state: session.schema_state(),
            ..Default::default()
        }),
        Err(e) => client.error(&e),
    };
    sent.is_ok()
        && client.flush().await.is_ok()
        && (database.is_none() || session.database().is_some())
}

/// One protocol command (`packet`: its payload, the command byte first); `collation`: the
/// handshake's, which COM_RESET_CONNECTION returns to. `Err` means the client connection is
/// gone.
pub async fn protocol_command(
    session: &mut Session,
    client: &mut Client,
    packet: &[u8],
    collation: u8,
) -> Result<Next, ProxyError> {
    let Some((&code, body)) = packet.split_first() else {
        let e = ProxyError::client(ER_UNKNOWN_COM_ERROR, b"08S01", "Empty command packet");
        reply_error(session, client, &e)?;
        return Ok(Next::Continue);
    };
    let ok = |session: &Session, client: &mut Client| {
        client.ok(&OkInfo {
            status: session.status(),
            ..Default::default()
        })
    };
    match code {
        c if c == Command::COM_QUIT as u8 => return Ok(Next::Quit),
        c if c == Command::COM_PING as u8 => ok(session, client)?,
        c if c == Command::COM_QUERY as u8 => session.query(client, body).await?,
        c if c == Command::COM_INIT_DB as u8 => {
            let db = String::from_utf8_lossy(body).into_owned();
            if let Err(e) = session.use_database(client, &db, MoreResults::None).await {
                reply_error(session, client, &e)?;
            }
        }
        c if c == Command::COM_RESET_CONNECTION as u8 => {
            session.reset(collation).await;
            ok(session, client)?;
        }
        c if c == Command::COM_SET_OPTION as u8 => {
            // 0: multi-statements on, 1: off. The reply is an EOF packet.
            match body.first() {
                Some(0) => client.caps.insert(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
                Some(1) => client.caps.remove(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
                _ => {}
            }
            client.packet(&eof_packet(0, session.status()))?;
        }
        c if c == Command::COM_STATISTICS as u8 => {
            let ds = session.rt.config.sharding.default_datasource;
            let answer = match session.connection(Target::primary(ds)).await {
                Ok(conn) => conn.simple_command(Command::COM_STATISTICS, &[]).await,
                Err(e) => Err(e),
            };
            session.txn.release_idle();
            match answer {
                Ok(text) => client.packet(&text)?,
                Err(e) => reply_error(session, client, &e)?,
            }
        }
        c if c == Command::COM_FIELD_LIST as u8 => {
            if let Err(e) = session.field_list(client, body).await {
                reply_error(session, client, &e)?;
            }
        }
        c if c == Command::COM_PROCESS_KILL as u8 => {
            let id = body
                .get(..4)
                .map(|b| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes"))));
            if let Err(e) = session.kill(client, false, id, MoreResults::None).await {
                reply_error(session, client, &e)?;
            }
        }
        c if Session::statement_command(c).is_some() => {
            prepared_statement_command(session, client, c, body).await?;
        }
        _ => {
            let e = ProxyError::client(
                ER_UNKNOWN_COM_ERROR,
                b"08S01",
                format!("Unknown command {code:#04x}"),
            );
            reply_error(session, client, &e)?;
        }
    }
    Ok(Next::Continue)
}

/// A COM_STMT_* command: prepare, execute, reset, fetch, close, send long data. `Err`
/// means the client connection is gone (or must go: its transaction was lost).
async fn prepared_statement_command(
    session: &mut Session,
    client: &mut Client,
    code: u8,
    body: &[u8],
) -> Result<(), ProxyError> {
    let outcome = match Session::statement_command(code).expect("a COM_STMT_* command") {
        Command::COM_STMT_PREPARE => {
            let started = std::time::Instant::now();
            let result = session.prepare_statement(client, body).await;
            let metrics = &session.proxy.metrics;
            metrics.count_statement("prepare", result.is_ok(), started);
            result
        }
        Command::COM_STMT_EXECUTE => session.execute_statement(client, body).await,
        Command::COM_STMT_RESET => session.reset_statement(client, body),
        Command::COM_STMT_FETCH => session.fetch(client, body),
        Command::COM_STMT_CLOSE => {
            session.close_statement(body);
            return Ok(());
        }
        _ => {
            session.long_data(body);
            return Ok(());
        }
    };
    if let Err(e) = outcome {
        reply_error(session, client, &e)?;
        if session.txn.lost().is_some() {
            return Err(ProxyError::ClientGone("transaction lost".into()));
        }
    }
    Ok(())
}

fn reply_error(
    session: &mut Session,
    client: &mut Client,
    e: &ProxyError,
) -> Result<(), ProxyError> {
    if let ProxyError::ClientGone(_) = e {
        return Err(e.clone());
    }
    session.state.record_error(e);
    client.error(e)
}
