//! Power-of-two-choices load balancing on outstanding requests.
//!
//! Pure: loads and a random number in, an index out. Which endpoints are
//! candidates (healthy, not ejected, not tried yet) is decided by the
//! caller.

/// Picks an index into `loads` (outstanding requests per candidate): two
/// distinct candidates drawn with `random`, the less loaded one wins (the
/// first drawn on a tie). `None` when there is no candidate.
pub fn p2c(loads: &[usize], random: u64) -> Option<usize> {
    p2c_by(loads.len(), random, |i| loads[i])
}

/// [`p2c`] over `n` candidates whose loads `load` reads by index: asked for
/// at most the two drawn, so a caller need not collect every load first.
pub fn p2c_by(n: usize, random: u64, load: impl Fn(usize) -> usize) -> Option<usize> {
    match n {
        0 => None,
        1 => Some(0),
        _ => {
            // Two independent draws from the two halves of `random`.
            let a = ((random & 0xffff_ffff) % n as u64) as usize;
            let mut b = ((random >> 32) % (n as u64 - 1)) as usize;
            if b >= a {
                b += 1;
            }
            Some(if load(b) < load(a) { b } else { a })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_single() {
        assert_eq!(p2c(&[], 42), None);
        assert_eq!(p2c(&[7], 42), Some(0));
    }

    #[test]
    fn picks_less_loaded_of_two_distinct() {
        for random in 0..10_000u64 {
            let r = random.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            // With two candidates both are always drawn: the idle one wins.
            assert_eq!(p2c(&[5, 0], r), Some(1));
            assert_eq!(p2c(&[0, 5], r), Some(0));
        }
    }

    #[test]
    fn never_picks_the_most_loaded_of_many() {
        let loads = [3, 3, 9, 3];
        for random in 0..10_000u64 {
            let r = random.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            assert_ne!(p2c(&loads, r), Some(2));
        }
    }

    #[test]
    fn spreads_equal_loads() {
        let loads = [0usize; 4];
        let mut counts = [0usize; 4];
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..40_000 {
            // xorshift: deterministic, good enough to check spreading.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            counts[p2c(&loads, x).unwrap()] += 1;
        }
        for c in counts {
            assert!((8_000..12_000).contains(&c), "{counts:?}");
        }
    }
}
