//! A small deterministic PRNG (splitmix64): the rand crate is not a dependency, and the generator
//! must give the same cluster for the same seed on every run.

use std::time::Duration;

/// splitmix64: 64 bits of state, passes BigCrush, and any seed (even 0) is a good one.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for one purpose (e.g. service sizes, pod placement), so that a change in
    /// how many numbers one part draws does not shift every other part.
    pub fn stream(seed: u64, purpose: u64) -> Rng {
        let mut mix = Rng(seed ^ purpose.wrapping_mul(0xA076_1D64_78BD_642F));
        Rng(mix.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0), by multiply-shift: the bias is below 2^-32 for any `n` a
    /// simulation uses.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        lo + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A duration uniform between `lo_ms` and `hi_ms` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(self.between(lo_ms, hi_ms))
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// Exactly `k` of `n` flags set, at random: fractions are honoured exactly, not on average.
    pub fn choose(&mut self, n: usize, k: usize) -> Vec<bool> {
        let mut order: Vec<usize> = (0..n).collect();
        self.shuffle(&mut order);
        let mut picked = vec![false; n];
        for &i in order.iter().take(k) {
            picked[i] = true;
        }
        picked
    }

    /// `len` characters of the alphabet Kubernetes uses for generated names (no vowels, no 0/1/3).
    pub fn safe_string(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| SAFE_ALPHABET[self.below(SAFE_ALPHABET.len())] as char)
            .collect()
    }

    /// A random (version 4) UUID.
    pub fn uuid(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0x0fff,
            0x8000 | ((lo >> 48) & 0x3fff),
            lo & 0xffff_ffff_ffff
        )
    }
}

/// FNV-1a: a stable hash of a string (std's hashers may change between releases).
pub(crate) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `k8s.io/apimachinery/pkg/util/rand`'s alphabet.
pub(crate) const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A 5-character pod name suffix, unique for every `ordinal` below 27^5 whatever the `salt`: the
/// ordinal is scrambled by a bijection of `0..27^5` so names look random yet never collide within
/// one template; the salt (one per template) makes templates differ.
pub(crate) fn pod_suffix(ordinal: u64, salt: u64) -> String {
    const SPACE: u64 = 27u64.pow(5);
    // Any multiplier prime to 3 permutes the residues modulo 3^15.
    let mut x = ((ordinal + salt % SPACE) % SPACE * 7_654_321 + 1_234_567) % SPACE;
    let mut out = [b'b'; 5];
    for c in out.iter_mut().rev() {
        *c = SAFE_ALPHABET[(x % 27) as usize];
        x /= 27;
    }
    out.iter().map(|&b| b as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut s1 = Rng::stream(7, 1);
        let mut s2 = Rng::stream(7, 2);
        assert_ne!(s1.next_u64(), s2.next_u64());
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(3);
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            let v = r.between(5, 9);
            assert!((5..=9).contains(&v));
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.choose(100, 17).iter().filter(|&&b| b).count(), 17);
        assert_eq!(r.uuid().len(), 36);
    }

    #[test]
    fn pod_suffixes_do_not_collide() {
        for salt in [0, 1, u64::MAX] {
            let names: HashSet<String> = (0..100_000).map(|i| pod_suffix(i, salt)).collect();
            assert_eq!(names.len(), 100_000);
        }
    }
}
