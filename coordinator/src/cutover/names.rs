//! Interned keys of the engine's soft state: the route names of every
//! proxy's applied generations and the backends of every proxy's
//! evidence.
//!
//! With P proxies and R routes the leader holds P × R applied entries and
//! about as many evidence entries, and every proxy names the same routes
//! and backends. Stored as they arrive, each entry carried its own copy of
//! the namespace and name strings (tens of bytes, two allocations);
//! interned, an entry holds one shared pointer, and each distinct name is
//! stored once: at 10,000 routes and 200 proxies, 4 million keys become
//! 20,000.
//!
//! A name no entry holds any more is dropped at the next sweep, which runs
//! when the pool has doubled since the last one, so the pool stays within
//! twice the names in use and sweeping costs O(1) per interning, amortized.
//! The pool is shared by the engine's copies (a pass works on a copy): it
//! is a cache, and what it holds is immutable.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

/// A pool of shared keys.
#[derive(Debug)]
pub(crate) struct Interner<T> {
    pool: Arc<Mutex<Pool<T>>>,
}

#[derive(Debug)]
struct Pool<T> {
    keys: HashSet<Arc<T>>,
    /// Pool size right after the last sweep.
    swept_at: usize,
}

/// Below this many keys the pool is never swept.
const SWEEP_FLOOR: usize = 1024;

impl<T> Clone for Interner<T> {
    fn clone(&self) -> Self {
        Interner {
            pool: Arc::clone(&self.pool),
        }
    }
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            pool: Arc::new(Mutex::new(Pool {
                keys: HashSet::new(),
                swept_at: 0,
            })),
        }
    }
}

impl<T: Eq + Hash> Interner<T> {
    /// The shared copy of `key`.
    pub(crate) fn intern(&self, key: T) -> Arc<T> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(shared) = pool.keys.get(&key) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(key);
        pool.keys.insert(Arc::clone(&shared));
        if pool.keys.len() >= SWEEP_FLOOR.max(2 * pool.swept_at) {
            // Keys only the pool holds are in no entry any more.
            pool.keys.retain(|k| Arc::strong_count(k) > 1);
            pool.swept_at = pool.keys.len();
        }
        shared
    }

    /// Distinct keys in the pool (some may be unused until the next sweep).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        pool.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_share_one_allocation() {
        let names = Interner::default();
        let a = names.intern(String::from("shop/cart"));
        let b = names.intern(String::from("shop/cart"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(names.len(), 1);
        let c = names.intern(String::from("shop/other"));
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn keys_nobody_holds_are_swept_and_the_pool_stays_bounded() {
        let names = Interner::default();
        let kept: Vec<Arc<String>> = (0..10).map(|i| names.intern(format!("kept-{i}"))).collect();
        for i in 0..100_000 {
            // Interned and dropped at once: a route that came and went.
            drop(names.intern(format!("gone-{i}")));
        }
        assert!(
            names.len() < 2 * SWEEP_FLOOR,
            "pool grew to {}",
            names.len()
        );
        // What is in use survives every sweep, still shared.
        for (i, k) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(k, &names.intern(format!("kept-{i}"))));
        }
    }
}
