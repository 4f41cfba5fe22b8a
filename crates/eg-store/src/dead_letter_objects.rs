//! The names of dead-letter objects, kept in Redis beside their records.
//!
//! The first time a record is about to be written, it is given the name of the object
//! it goes in (`name_dead_letter_objects.lua`), and keeps it until it leaves the
//! dead-letter stream (`finish_dead_letters.lua` forgets the name in the same step). Each
//! name also keeps the records it was first given to. So however the records come back —
//! with newer ones of the same hour, or split between workers — a record is only ever
//! written under its one name, with the same other records: its object is written once,
//! or found already there.
//!
//! Memory: one hash entry per named record and one per name, for records still in the
//! stream only.

use crate::codec;
use crate::connection::Store;
use crate::error::StoreError;
use crate::keyspace::Partition;
use crate::queue::DeadLetterItem;
use crate::scripts;

/// One dead-letter object's name and the records it holds.
#[derive(Debug, Clone)]
pub struct NamedObject {
    pub name: String,
    /// The entry ids of every record of the object still in the dead-letter stream.
    pub members: Vec<String>,
    /// The records of `members` that were not handed in, read from the stream.
    pub others: Vec<DeadLetterItem>,
}

/// What the naming script answers per name: name, entry ids, then (id, record) pairs.
type Reply = Vec<(String, Vec<String>, Vec<String>)>;

impl Store {
    /// Names the objects of dead-letter records read from `partition`: `groups` pairs a
    /// proposed name with the entry ids of the records read for it. A record without a
    /// name gets its group's; a record named before keeps its name. Returns every name the
    /// records have, each with all its records still in the stream (those not handed in
    /// read from it). A record that is no longer in the stream (finished meanwhile) is in
    /// none: it must not be written.
    pub async fn name_dead_letter_objects(
        &self,
        partition: &Partition,
        groups: &[(String, Vec<String>)],
    ) -> Result<Vec<NamedObject>, StoreError> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = scripts::NAME_DEAD_LETTER_OBJECTS.prepare_invoke();
        invocation
            .key(partition.deadletter())
            .key(partition.deadletter_object_of())
            .key(partition.deadletter_object_members())
            .arg(codec::DEAD_LETTER_FIELD);
        for (name, ids) in groups {
            invocation.arg(name).arg(ids.len()).arg(ids);
        }
        let mut conn = self.conn().await?;
        let reply: Reply = invocation.invoke_async(&mut conn).await?;
        drop(conn);
        reply
            .into_iter()
            .map(|(name, members, others)| {
                let others = others
                    .chunks(2)
                    .map(|pair| decode(partition, pair))
                    .collect::<Result<_, _>>()?;
                Ok(NamedObject { name, members, others })
            })
            .collect()
    }

    /// Finishes dead-letter records (written, or given up on): they leave the stream and
    /// their object names are forgotten, in one step.
    pub async fn finish_dead_letters(&self, partition: &Partition, entry_ids: &[String]) -> Result<u64, StoreError> {
        if entry_ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.conn().await?;
        Ok(scripts::FINISH_DEAD_LETTERS
            .key(partition.deadletter())
            .key(partition.deadletter_object_of())
            .key(partition.deadletter_object_members())
            .arg(crate::keyspace::DEADLETTER_GROUP)
            .arg(entry_ids)
            .invoke_async(&mut conn)
            .await?)
    }
}

fn decode(partition: &Partition, pair: &[String]) -> Result<DeadLetterItem, StoreError> {
    let [id, raw] = pair else {
        return Err(StoreError::corrupt(
            partition.deadletter(),
            "naming dead-letter objects answered an entry id without its record".to_owned(),
        ));
    };
    let (entry, event_json) = codec::decode_dead_letter(raw)
        .map_err(|e| StoreError::corrupt(partition.deadletter(), format!("dead-letter entry {id}: {e}")))?;
    Ok(DeadLetterItem {
        partition: partition.index,
        entry_id: id.clone(),
        entry,
        event_json,
    })
}
