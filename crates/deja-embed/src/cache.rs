//! A bounded LRU of embeddings in front of any [`Embedder`].
//!
//! Agents repeat queries (the same alert text, the same follow-up question), and embedding a
//! query is the one search stage that costs CPU in this process (~10–40 ms on a busy 2-core
//! machine, docs/BENCHMARKS.md). The cache answers a repeated text from memory; the vector is
//! exactly the one the model returned the first time, so results do not change.
//!
//! Through [`crate::embed_blocking`] the cache is asked before the model's admission (a
//! remembered text never waits for an inference) and again once admitted: callers that
//! asked for the same text while it was being embedded get it from memory, so identical
//! concurrent texts cost one inference.

use crate::{Admission, EmbedError, Embedder};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Texts looked up in an embedding cache: `hit` answered from memory, `miss` embedded.
pub const CACHE_LOOKUPS: &str = "deja_embed_cache_lookups_total";

/// An [`Embedder`] that remembers the vectors of the last `capacity` distinct texts.
/// Capacity 0 turns the cache off (every text goes to the inner embedder).
pub struct CachingEmbedder<E> {
    inner: E,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Lookups so far (for tests, benchmarks and logs; `/metrics` has the same counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
}

impl<E: Embedder> CachingEmbedder<E> {
    pub fn new(inner: E, capacity: usize) -> Self {
        CachingEmbedder {
            inner,
            lru: Mutex::new(Lru::new(capacity)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Embeds one short text and forgets it: the first inference of an ONNX session is much
    /// slower than the next ones, so servers pay it at startup rather than on a user's search.
    pub fn warm_up(&self) -> Result<(), EmbedError> {
        self.inner.embed(&["warm-up query".to_owned()]).map(|_| ())
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        // A panic while holding the lock leaves a consistent map (every mutation is a single
        // insert/remove pair), so a poisoned lock is still safe to use.
        self.lru
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<E: Embedder> Embedder for CachingEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn admission(&self) -> Option<&Admission> {
        self.inner.admission()
    }

    /// Every text's vector when all are cached (counted as hits), else `None` (counted as
    /// nothing: [`Embedder::embed`] counts the look-ups that follow).
    fn remembered(&self, texts: &[String]) -> Option<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return None;
        }
        let vectors = {
            let mut lru = self.lru();
            texts
                .iter()
                .map(|text| lru.get(text))
                .collect::<Option<Vec<_>>>()?
        };
        let hits = vectors.len() as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        metrics::counter!(CACHE_LOOKUPS, "outcome" => "hit").increment(hits);
        Some(vectors)
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let mut lru = self.lru();
            texts.iter().map(|text| lru.get(text)).collect()
        };
        let missing: Vec<String> = texts
            .iter()
            .zip(&out)
            .filter(|(_, cached)| cached.is_none())
            .map(|(text, _)| text.clone())
            .collect();
        let hits = (texts.len() - missing.len()) as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        metrics::counter!(CACHE_LOOKUPS, "outcome" => "hit").increment(hits);
        metrics::counter!(CACHE_LOOKUPS, "outcome" => "miss").increment(missing.len() as u64);
        if !missing.is_empty() {
            let fresh = self.inner.embed(&missing)?;
            if fresh.len() != missing.len() {
                return Err(EmbedError::Inference(format!(
                    "the embedder returned {} vectors for {} texts",
                    fresh.len(),
                    missing.len()
                )));
            }
            let mut fresh = fresh.into_iter();
            let mut lru = self.lru();
            for (text, slot) in texts.iter().zip(out.iter_mut()) {
                if slot.is_none() {
                    let vector = fresh.next().unwrap_or_default();
                    lru.put(text, &vector);
                    *slot = Some(vector);
                }
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// Least-recently-used map from text to vector: a hash map for look-ups and an ordered map
/// from "last used" ticks to texts for eviction, both O(log n).
struct Lru {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, (Vec<f32>, u64)>,
    by_use: BTreeMap<u64, String>,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Lru {
            capacity,
            tick: 0,
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn get(&mut self, text: &str) -> Option<Vec<f32>> {
        let tick = self.next_tick();
        let (vector, used) = self.entries.get_mut(text)?;
        let old = std::mem::replace(used, tick);
        let vector = vector.clone();
        if let Some(key) = self.by_use.remove(&old) {
            self.by_use.insert(tick, key);
        }
        Some(vector)
    }

    fn put(&mut self, text: &str, vector: &[f32]) {
        if self.capacity == 0 {
            return;
        }
        let tick = self.next_tick();
        if let Some((_, old)) = self
            .entries
            .insert(text.to_owned(), (vector.to_vec(), tick))
        {
            self.by_use.remove(&old);
        }
        self.by_use.insert(tick, text.to_owned());
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_least_recently_used_text_is_evicted_first() {
        let mut lru = Lru::new(2);
        lru.put("a", &[1.0]);
        lru.put("b", &[2.0]);
        assert_eq!(lru.get("a"), Some(vec![1.0])); // "b" is now the oldest
        lru.put("c", &[3.0]);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get("b"), None);
        assert_eq!(lru.get("a"), Some(vec![1.0]));
        assert_eq!(lru.get("c"), Some(vec![3.0]));
    }

    #[test]
    fn putting_a_known_text_again_replaces_it_without_growing() {
        let mut lru = Lru::new(2);
        lru.put("a", &[1.0]);
        lru.put("a", &[1.5]);
        lru.put("b", &[2.0]);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get("a"), Some(vec![1.5]));
        assert_eq!(lru.by_use.len(), 2);
    }

    #[test]
    fn a_zero_capacity_cache_keeps_nothing() {
        let mut lru = Lru::new(0);
        lru.put("a", &[1.0]);
        assert_eq!(lru.get("a"), None);
        assert_eq!(lru.len(), 0);
    }
}
