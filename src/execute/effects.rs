//! What running a plan changes besides its statements: the route counters and cache
//! fills its planning collected, the index rows an insert writes first (SPEC §5), and
//! what a probe of every shard learnt.

use crate::config::Config;
use crate::error::ProxyError;
use crate::plan::Plan;
use crate::route::Router;
use crate::route::index::IndexTable;

/// Applies the plan's effects and writes its index rows (each committed on its own, before
/// the shard write, so the order can be found later; a leftover row of a failed insert
/// only reads as "not found").
pub async fn before_running<I: IndexTable>(
    router: &Router<I>,
    plan: &Plan,
) -> Result<(), ProxyError> {
    router.apply(&plan.effects).await;
    for (id, channel) in &plan.index_writes {
        router.write_index(*id, *channel).await?;
    }
    Ok(())
}

/// What a probe found for each id it looked for: the shards holding it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeFindings {
    /// (order id, shards whose tables hold it).
    pub found: Vec<(u64, Vec<u32>)>,
}

impl ProbeFindings {
    /// Caches what is certain: found on exactly one shard, that shard's channel; found
    /// nowhere, a negative entry. Returns (found, not found, ambiguous) counts.
    pub async fn learn<I: IndexTable>(
        &self,
        router: &Router<I>,
        config: &Config,
    ) -> (u64, u64, u64) {
        let (mut found, mut nowhere, mut ambiguous) = (0, 0, 0);
        for (id, shards) in &self.found {
            match shards.as_slice() {
                [] => {
                    nowhere += 1;
                    router.learn_from_probe(*id, None).await;
                }
                [shard] => {
                    found += 1;
                    if let Some(channel) = config.channel_of_shard(*shard) {
                        router.learn_from_probe(*id, Some(channel)).await;
                    }
                }
                _ => ambiguous += 1,
            }
        }
        (found, nowhere, ambiguous)
    }
}
