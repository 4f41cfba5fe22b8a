//! A bounded memory of computed answers shared across tasks: what is costly to compute
//! per request but the same every time for the same key (a URL parsed and checked, an
//! endpoint id). Past its bound it starts again empty rather than tracking use, so a
//! hot key is computed once more after a clear, and memory never grows with the number
//! of keys ever seen.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

#[derive(Debug)]
pub struct BoundedMemo<K, V> {
    most: usize,
    entries: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash, V: Clone> BoundedMemo<K, V> {
    /// A memory of at most `most` answers.
    pub fn new(most: usize) -> Self {
        Self {
            most,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The answer remembered for `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.lock().get(key).cloned()
    }

    /// Remembers `value` for `key`, first forgetting everything if the memory is full.
    pub fn insert(&self, key: K, value: V) {
        let mut entries = self.lock();
        if entries.len() >= self.most && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, value);
    }

    /// The answer for `key`: remembered, or computed by `compute` and remembered.
    pub fn get_or_insert_with(&self, key: K, compute: impl FnOnce(&K) -> V) -> V {
        if let Some(value) = self.lock().get(&key) {
            return value.clone();
        }
        // Computed outside the lock: two tasks may compute the same answer at once,
        // which costs less than making every reader wait on one computation.
        let value = compute(&key);
        self.insert(key, value.clone());
        value
    }

    /// How many answers are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, V>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_answers_and_starts_again_past_its_bound() {
        let memo = BoundedMemo::new(3);
        assert_eq!(memo.get("a"), None);
        memo.insert("a".to_owned(), 1);
        assert_eq!(memo.get("a"), Some(1));
        memo.insert("b".to_owned(), 2);
        memo.insert("c".to_owned(), 3);
        memo.insert("c".to_owned(), 4);
        assert_eq!(
            (memo.len(), memo.get("c")),
            (3, Some(4)),
            "a known key replaces, never clears"
        );
        memo.insert("d".to_owned(), 5);
        assert_eq!(memo.len(), 1, "full: forgot everything for the new key");
        assert_eq!((memo.get("a"), memo.get("d")), (None, Some(5)));
    }

    #[test]
    fn computes_an_answer_once_while_it_is_remembered() {
        let memo = BoundedMemo::new(10);
        let mut computed = 0;
        for _ in 0..3 {
            let value = memo.get_or_insert_with("k".to_owned(), |k| {
                computed += 1;
                k.len()
            });
            assert_eq!(value, 1);
        }
        assert_eq!(computed, 1);
    }
}
