//! MariaDB GTID positions: `domain-server-sequence` per replication domain, written as a
//! comma-separated list (`0-1-100,1-2-7`), as `@@gtid_current_pos`, `@@last_gtid` and
//! `MASTER_GTID_WAIT` read and write them (MariaDB KB, "Global Transaction ID").
//!
//! A position covers another when, in every domain the other names, its sequence number
//! is at least as high: one writer per domain (the sandbox gives every server its own
//! `gtid_domain_id`) makes sequence numbers of a domain grow with its commits.

use std::fmt;

/// One domain's last transaction: `domain-server-sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gtid {
    /// `gtid_domain_id`.
    pub domain: u32,
    /// `server_id` of the server that committed it.
    pub server: u32,
    /// Sequence number within the domain.
    pub sequence: u64,
}

/// A position: at most one GTID per domain, sorted by domain. Empty: nothing required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidSet(Vec<Gtid>);

impl GtidSet {
    /// Reads MariaDB's text form (`0-1-100,1-2-7`; empty text: the empty set). A domain
    /// named twice keeps its highest sequence.
    ///
    /// # Errors
    /// A part that is not three unsigned numbers joined by `-` (the text is named).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut set = GtidSet::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut it = part.split('-');
            let gtid = match (it.next(), it.next(), it.next(), it.next()) {
                (Some(d), Some(s), Some(n), None) => (d.parse(), s.parse(), n.parse()),
                _ => return Err(format!("`{part}` is not a GTID (domain-server-sequence)")),
            };
            let (Ok(domain), Ok(server), Ok(sequence)) = gtid else {
                return Err(format!("`{part}` is not a GTID (domain-server-sequence)"));
            };
            set.add(Gtid {
                domain,
                server,
                sequence,
            });
        }
        Ok(set)
    }

    /// Its GTIDs, one per domain, by domain.
    pub fn iter(&self) -> impl Iterator<Item = &Gtid> {
        self.0.iter()
    }

    /// Nothing required.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a GTID: its domain keeps the higher sequence.
    pub fn add(&mut self, gtid: Gtid) {
        match self.0.binary_search_by_key(&gtid.domain, |g| g.domain) {
            Ok(i) => {
                if gtid.sequence > self.0[i].sequence {
                    self.0[i] = gtid;
                }
            }
            Err(i) => self.0.insert(i, gtid),
        }
    }

    /// Adds every GTID of `other` ([`GtidSet::add`]).
    pub fn merge(&mut self, other: &GtidSet) {
        for g in &other.0 {
            self.add(*g);
        }
    }

    /// Whether this position has applied everything `required` names: in each of its
    /// domains a sequence at least as high.
    pub fn covers(&self, required: &GtidSet) -> bool {
        required.0.iter().all(|r| {
            self.0
                .binary_search_by_key(&r.domain, |g| g.domain)
                .is_ok_and(|i| self.0[i].sequence >= r.sequence)
        })
    }
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}-{}-{}", g.domain, g.server, g.sequence)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_mariadb_positions() {
        let set = GtidSet::parse("1-2-7, 0-1-100").unwrap();
        assert_eq!(set.to_string(), "0-1-100,1-2-7");
        assert!(GtidSet::parse("").unwrap().is_empty());
        assert!(GtidSet::parse("0-1").is_err());
        assert!(GtidSet::parse("0-1-x").is_err());
        assert!(GtidSet::parse("0-1-2-3").is_err());
        // A domain twice keeps its highest sequence.
        assert_eq!(
            GtidSet::parse("0-1-5,0-3-9,0-1-2").unwrap().to_string(),
            "0-3-9"
        );
    }

    #[test]
    fn covers_domain_by_domain() {
        let replica = GtidSet::parse("0-1-100,1-2-7").unwrap();
        assert!(replica.covers(&GtidSet::parse("0-1-100").unwrap()));
        assert!(replica.covers(&GtidSet::parse("0-1-99,1-2-7").unwrap()));
        assert!(!replica.covers(&GtidSet::parse("0-1-101").unwrap()));
        // A domain the replica has never seen is not covered.
        assert!(!replica.covers(&GtidSet::parse("2-3-1").unwrap()));
        assert!(replica.covers(&GtidSet::default()));
        assert!(GtidSet::default().covers(&GtidSet::default()));
    }

    #[test]
    fn merge_keeps_each_domains_latest() {
        let mut a = GtidSet::parse("0-1-100").unwrap();
        a.merge(&GtidSet::parse("0-1-90,1-2-3").unwrap());
        assert_eq!(a.to_string(), "0-1-100,1-2-3");
    }
}
