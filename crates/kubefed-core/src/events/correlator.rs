//! client-go's event correlator (`tools/record/events_cache.go`, v0.22,
//! KubeFed's): an aggregator by reason, an observation cache (the same event
//! → PATCH `count`, `lastTimestamp`, `message`), and a token-bucket spam
//! filter per source and object; whether an Event is created or an existing
//! one's `count` bumped. Time is passed in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};

use crate::events::record::*;

/// client-go's LRU size of each cache.
const MAX_CACHE_ENTRIES: usize = 4096;
/// Distinct messages of one reason before they are combined.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long similar events are remembered for combining.
const AGGREGATE_INTERVAL_NANOS: i64 = 600 * 1_000_000_000;
/// Spam filter: a burst of 25 per source and object, then one per 5 minutes.
const SPAM_BURST: f64 = 25.0;
const SPAM_QPS: f64 = 1.0 / 300.0;
/// The prefix of a combined event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// A least-recently-used map of at most `MAX_CACHE_ENTRIES`.
#[derive(Debug)]
struct Lru<V> {
    tick: u64,
    entries: HashMap<String, (u64, V)>,
    order: BTreeMap<u64, String>,
    cap: usize,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            cap: MAX_CACHE_ENTRIES,
        }
    }
}

impl<V> Lru<V> {
    fn get(&mut self, key: &str) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        let (t, v) = self.entries.get_mut(key)?;
        self.order.remove(t);
        *t = tick;
        self.order.insert(tick, key.to_string());
        Some(v)
    }

    fn add(&mut self, key: String, value: V) {
        self.tick += 1;
        if let Some((t, _)) = self.entries.remove(&key) {
            self.order.remove(&t);
        }
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (self.tick, value));
        while self.entries.len() > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }
}

#[derive(Clone, Debug, Default)]
struct AggregateRecord {
    local_keys: BTreeSet<String>,
    last_nanos: i64,
}

/// What is known of an Event written (or about to be).
#[derive(Clone, Debug, Default)]
struct Observed {
    count: u32,
    first_timestamp: String,
    name: String,
}

#[derive(Clone, Debug)]
struct Bucket {
    tokens: f64,
    last_nanos: i64,
}

/// The request that records one Event.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// POST this Event to its namespace.
    Create { namespace: String, body: Value },
    /// Strategic-merge PATCH of an existing Event; `body` is created
    /// instead when the Event no longer exists (404), as client-go does.
    Patch {
        namespace: String,
        name: String,
        patch: Value,
        body: Value,
    },
}

/// The correlator's verdict on one Event: the request to make, and the key
/// to report its answer under ([`Correlator::written`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Correlated {
    pub key: String,
    pub write: Write,
}

/// client-go's `EventCorrelator`: kept for a process's life (across a
/// watch's rounds).
#[derive(Debug, Default)]
pub struct Correlator {
    aggregates: Lru<AggregateRecord>,
    observed: Lru<Observed>,
    spam: Lru<Bucket>,
    last_nanos: i64,
}

fn join_key(parts: &[&str]) -> String {
    // client-go joins with "" too.
    parts.concat()
}

fn spam_key(e: &Event) -> String {
    let i = &e.involved;
    join_key(&[
        &e.component,
        "",
        &i.kind,
        &i.namespace,
        &i.name,
        &i.uid,
        &i.api_version,
    ])
}

fn aggregate_key(e: &Event) -> String {
    join_key(&[&spam_key(e), e.event_type.as_str(), &e.reason, "", ""])
}

fn event_key(e: &Event) -> String {
    let i = &e.involved;
    join_key(&[
        &e.component,
        "",
        &i.kind,
        &i.namespace,
        &i.name,
        "",
        &i.uid,
        &i.api_version,
        e.event_type.as_str(),
        &e.reason,
        &e.message,
    ])
}

/// An Event's JSON as client-go's recorder makes it (`makeEvent`).
fn body(e: &Event, name: &str, first: &str, last: &str, count: u32) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": e.involved.event_namespace()},
        "involvedObject": e.involved.to_json(),
        "reason": e.reason,
        "message": e.message,
        "source": {"component": e.component},
        "firstTimestamp": first,
        "lastTimestamp": last,
        "count": count,
        "type": e.event_type.as_str(),
    })
}

impl Correlator {
    pub fn new() -> Correlator {
        Correlator::default()
    }

    /// Correlates `event` at `now_nanos` (Unix time): a create, a count
    /// bump of the Event recorded before, or `None` when the spam filter
    /// drops it. Event names carry the time in nanoseconds, made strictly
    /// increasing so that two Events of one object never share a name.
    pub fn correlate(&mut self, event: &Event, now_nanos: i64) -> Option<Correlated> {
        let now = now_nanos.max(self.last_nanos + 1);
        self.last_nanos = now;
        let stamp = crate::time::rfc3339(now.div_euclid(1_000_000_000));
        let (event, key) = self.aggregate(event, now);
        let name = format!("{}.{:x}", event.involved.name, now);
        let seen = self.observed.get(&key).cloned().unwrap_or_default();
        let (observed, write) = if seen.count > 0 {
            let count = seen.count + 1;
            let full = body(&event, &seen.name, &seen.first_timestamp, &stamp, count);
            let patch = json!({"count": count, "lastTimestamp": stamp, "message": event.message});
            let write = Write::Patch {
                namespace: event.involved.event_namespace().to_string(),
                name: seen.name.clone(),
                patch,
                body: full,
            };
            (Observed { count, ..seen }, write)
        } else {
            let write = Write::Create {
                namespace: event.involved.event_namespace().to_string(),
                body: body(&event, &name, &stamp, &stamp, 1),
            };
            let observed = Observed {
                count: 1,
                first_timestamp: stamp.clone(),
                name,
            };
            (observed, write)
        };
        self.observed.add(key.clone(), observed);
        self.accept(&event, now)
            .then_some(Correlated { key, write })
    }

    /// The aggregator: the tenth distinct message of one reason on one
    /// object within ten minutes, and every one after, is recorded as one
    /// combined Event.
    fn aggregate(&mut self, event: &Event, now: i64) -> (Event, String) {
        let akey = aggregate_key(event);
        let mut record = self.aggregates.get(&akey).cloned().unwrap_or_default();
        if now - record.last_nanos > AGGREGATE_INTERVAL_NANOS {
            record = AggregateRecord::default();
        }
        record.local_keys.insert(event.message.clone());
        record.last_nanos = now;
        let combine = record.local_keys.len() >= AGGREGATE_MAX_EVENTS;
        if combine {
            // Go pops any one; the set must not grow past the maximum.
            let drop = record
                .local_keys
                .iter()
                .find(|k| **k != event.message)
                .cloned();
            if let Some(k) = drop {
                record.local_keys.remove(&k);
            }
        }
        self.aggregates.add(akey.clone(), record);
        if !combine {
            return (event.clone(), event_key(event));
        }
        let mut combined = event.clone();
        combined.message = format!("{COMBINED_PREFIX}{}", event.message);
        (combined, akey)
    }

    /// The spam filter's token bucket for the event's source and object.
    fn accept(&mut self, event: &Event, now: i64) -> bool {
        let key = spam_key(event);
        let mut b = self.spam.get(&key).cloned().unwrap_or(Bucket {
            tokens: SPAM_BURST,
            last_nanos: now,
        });
        let elapsed = (now - b.last_nanos).max(0) as f64 / 1e9;
        b.tokens = (b.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        b.last_nanos = now;
        let ok = b.tokens >= 1.0;
        if ok {
            b.tokens -= 1.0;
        }
        self.spam.add(key, b);
        ok
    }

    /// The server's answer to a write under `key`: its name (a create after
    /// a vanished Event has a new one), `count` and `firstTimestamp`.
    pub fn written(&mut self, key: &str, answer: &Value) {
        let s = |v: &Value| v.as_str().map(str::to_string);
        let (Some(name), Some(first)) =
            (s(&answer["metadata"]["name"]), s(&answer["firstTimestamp"]))
        else {
            return;
        };
        let count = answer["count"].as_u64().unwrap_or(1) as u32;
        let observed = Observed {
            count,
            first_timestamp: first,
            name,
        };
        self.observed.add(key.to_string(), observed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lru_forgets_the_least_recently_used() {
        let mut l: Lru<u32> = Lru {
            cap: 2,
            ..Lru::default()
        };
        l.add("a".into(), 1);
        l.add("b".into(), 2);
        assert_eq!(l.get("a").copied(), Some(1));
        l.add("c".into(), 3);
        assert!(l.get("b").is_none());
        assert_eq!(l.get("a").copied(), Some(1));
        assert_eq!(l.get("c").copied(), Some(3));
    }
}
