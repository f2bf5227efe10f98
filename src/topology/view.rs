//! What one probe round concludes about a clustered datasource's members: who is up,
//! which one is the primary, which replicas may serve reads. Pure: the prober
//! ([`super::probe`]) feeds it what each member answered.

use std::time::{Duration, Instant};

use super::gtid::GtidSet;
use crate::backend::probe::ReplicationStatus;
use crate::config::TopologySettings;

/// What one member answered a probe.
#[derive(Debug, Clone)]
pub enum Observation {
    /// No answer within `probe_timeout`, or an error (its text).
    Failed(String),
    /// It answered.
    Answered(Answer),
}

/// A member's answer to a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// `@@read_only`.
    pub read_only: bool,
    /// `@@gtid_current_pos`: what it has committed or applied.
    pub gtid: GtidSet,
    /// `SHOW SLAVE STATUS`, when replication is configured on it.
    pub replication: Option<ReplicationStatus>,
}

/// A replica's lag: `None` (unknown, as good as infinite) when replication is not running
/// or the server reports NULL, never 0 for a stopped replica.
pub fn lag(r: &ReplicationStatus) -> Option<Duration> {
    if r.io_running && r.sql_running {
        r.seconds_behind.map(Duration::from_secs)
    } else {
        None
    }
}

/// A member's role by the latest probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not probed yet.
    Unknown,
    /// Its probe failed.
    Down,
    /// The one writable member: writes go here.
    Primary,
    /// Writable, beside another writable member (split brain): no writes at all.
    Writable,
    /// Read-only and replicating.
    Replica,
    /// Read-only without replication configured: neither writes nor reads.
    ReadOnly,
}

impl Role {
    /// The name `SHOW ROUTEKEY TOPOLOGY` and the metrics use.
    pub fn name(self) -> &'static str {
        match self {
            Role::Unknown => "unknown",
            Role::Down => "down",
            Role::Primary => "primary",
            Role::Writable => "writable",
            Role::Replica => "replica",
            Role::ReadOnly => "read_only",
        }
    }
}

/// One member by the latest probe.
#[derive(Debug, Clone)]
pub struct MemberView {
    /// Its role.
    pub role: Role,
    /// Its replication lag: `None` when unknown or replication is not running.
    pub lag: Option<Duration>,
    /// A replica that may serve reads: up, replicating, at most `max_replica_lag` behind,
    /// and so for two probes in a row after it was not (one at start).
    pub readable: bool,
    /// Probes in a row that found it fit for reads.
    pub good_streak: u32,
    /// Its position (`@@gtid_current_pos`) at its last answer.
    pub gtid: GtidSet,
    /// When it last answered.
    pub answered_at: Option<Instant>,
    /// Why its last probe failed, or its replication's last error; empty when none.
    pub error: String,
}

impl MemberView {
    fn unknown() -> Self {
        Self {
            role: Role::Unknown,
            lag: None,
            readable: false,
            good_streak: 0,
            gtid: GtidSet::default(),
            answered_at: None,
            error: String::new(),
        }
    }
}

/// Where writes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Primary {
    /// The member with this index.
    Known(usize),
    /// No member is writable (a failover under way, or every member down): writes wait.
    None,
    /// Several members are writable (their indexes): writes are refused.
    SplitBrain(Vec<usize>),
}

/// A datasource's members as one probe round found them.
#[derive(Debug, Clone)]
pub struct View {
    /// Probe rounds so far (0: none yet).
    pub round: u64,
    /// Where writes go.
    pub primary: Primary,
    /// The last member known as the primary (reads go there during a split brain).
    pub last_primary: Option<usize>,
    /// By member index.
    pub members: Vec<MemberView>,
}

impl View {
    /// Before any probe: nothing known.
    pub fn initial(members: usize) -> Self {
        Self {
            round: 0,
            primary: Primary::None,
            last_primary: None,
            members: (0..members).map(|_| MemberView::unknown()).collect(),
        }
    }

    /// The next view from this one and what each member answered (`observed`, by member
    /// index) at `now`.
    pub fn next(
        &self,
        observed: &[Observation],
        settings: &TopologySettings,
        now: Instant,
    ) -> View {
        let members: Vec<MemberView> = observed
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let before = self
                    .members
                    .get(i)
                    .cloned()
                    .unwrap_or_else(MemberView::unknown);
                member_next(&before, o, settings, now)
            })
            .collect();
        let writable: Vec<usize> = observed
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o, Observation::Answered(a) if !a.read_only))
            .map(|(i, _)| i)
            .collect();
        let primary = match writable.as_slice() {
            [] => Primary::None,
            [one] => Primary::Known(*one),
            _ => Primary::SplitBrain(writable.clone()),
        };
        let mut members = members;
        for &w in &writable {
            members[w].role = if writable.len() == 1 {
                Role::Primary
            } else {
                Role::Writable
            };
        }
        let last_primary = match primary {
            Primary::Known(m) => Some(m),
            _ => self.last_primary,
        };
        View {
            round: self.round + 1,
            primary,
            last_primary,
            members,
        }
    }
}

fn member_next(
    before: &MemberView,
    observed: &Observation,
    settings: &TopologySettings,
    now: Instant,
) -> MemberView {
    match observed {
        Observation::Failed(why) => MemberView {
            role: Role::Down,
            lag: None,
            readable: false,
            good_streak: 0,
            gtid: before.gtid.clone(),
            answered_at: before.answered_at,
            error: why.clone(),
        },
        Observation::Answered(a) => {
            let lag = a.replication.as_ref().and_then(lag);
            let role = match (&a.replication, a.read_only) {
                // Writable: settled by the caller (primary or split brain).
                (_, false) => Role::Primary,
                (Some(_), true) => Role::Replica,
                (None, true) => Role::ReadOnly,
            };
            let fit = role == Role::Replica && lag.is_some_and(|l| l <= settings.max_replica_lag);
            let good_streak = if fit { before.good_streak + 1 } else { 0 };
            // Back in rotation after two good probes in a row; a member first seen fit
            // (the proxy just started, or the member was just added) serves at once.
            let first_sight = before.role == Role::Unknown;
            let readable = fit && (before.readable || first_sight || good_streak >= 2);
            MemberView {
                role,
                lag,
                readable,
                good_streak,
                gtid: a.gtid.clone(),
                answered_at: Some(now),
                error: a
                    .replication
                    .as_ref()
                    .map(|r| r.last_error.clone())
                    .unwrap_or_default(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TopologySettings {
        TopologySettings::default()
    }

    fn primary() -> Observation {
        Observation::Answered(Answer {
            read_only: false,
            gtid: GtidSet::parse("0-1-10").unwrap(),
            replication: None,
        })
    }

    fn replica(io: bool, sql: bool, behind: Option<u64>) -> Observation {
        Observation::Answered(Answer {
            read_only: true,
            gtid: GtidSet::parse("0-1-9").unwrap(),
            replication: Some(ReplicationStatus {
                io_running: io,
                sql_running: sql,
                seconds_behind: behind,
                last_error: String::new(),
            }),
        })
    }

    fn round(view: &View, observed: &[Observation]) -> View {
        view.next(observed, &settings(), Instant::now())
    }

    #[test]
    fn one_writable_member_is_the_primary() {
        let v = round(
            &View::initial(2),
            &[primary(), replica(true, true, Some(0))],
        );
        assert_eq!(v.primary, Primary::Known(0));
        assert_eq!(v.members[0].role, Role::Primary);
        assert_eq!(v.members[1].role, Role::Replica);
        assert!(
            v.members[1].readable,
            "a fit replica seen first serves at once"
        );
        assert!(!v.members[0].readable, "the primary is not a replica");
    }

    #[test]
    fn no_writable_member_means_no_primary_and_two_mean_split_brain() {
        let none = round(
            &View::initial(2),
            &[
                Observation::Failed("refused".into()),
                replica(false, true, None),
            ],
        );
        assert_eq!(none.primary, Primary::None);
        assert_eq!(none.members[0].role, Role::Down);
        let two = round(&View::initial(2), &[primary(), primary()]);
        assert_eq!(two.primary, Primary::SplitBrain(vec![0, 1]));
        assert_eq!(two.members[1].role, Role::Writable);
    }

    #[test]
    fn stopped_replication_is_never_zero_lag() {
        for (io, sql, behind) in [
            (false, true, Some(0)),
            (true, false, Some(0)),
            (true, true, None),
        ] {
            let v = round(&View::initial(2), &[primary(), replica(io, sql, behind)]);
            assert_eq!(
                v.members[1].lag, None,
                "io {io} sql {sql} behind {behind:?}"
            );
            assert!(!v.members[1].readable);
        }
    }

    #[test]
    fn a_lagging_replica_returns_after_two_good_probes_in_a_row() {
        let v = round(
            &View::initial(2),
            &[primary(), replica(true, true, Some(0))],
        );
        assert!(v.members[1].readable);
        let v = round(&v, &[primary(), replica(true, true, Some(6))]);
        assert!(!v.members[1].readable, "over max_replica_lag (5 s)");
        let v = round(&v, &[primary(), replica(true, true, Some(1))]);
        assert!(!v.members[1].readable, "one good probe is not enough");
        let v = round(&v, &[primary(), replica(true, true, Some(1))]);
        assert!(v.members[1].readable, "two in a row");
        let v = round(&v, &[primary(), Observation::Failed("timeout".into())]);
        assert!(!v.members[1].readable);
        assert_eq!(
            v.members[1].gtid.to_string(),
            "0-1-9",
            "the last known position stays"
        );
    }
}
