//! Go's 128-bit FNV-1a (`hash/fnv`'s `New128a`), with the fixed parts of a print folded in one
//! step each.
//!
//! A byte's xor touches only the low 8 bits of the state, and a multiply's low 8 bits depend only
//! on the factors' low 8 bits. So folding any text into a state `h` gives the fold of `h`'s low 8
//! bits plus the rest of `h` times the prime to the text's length. For a text known at compile
//! time, the 256 folds are a table, and the whole text costs one lookup and one multiply: the
//! field names and Go types of a print are most of its bytes.

/// A 128-bit FNV-1a hash: the sort key. Go compares the big-endian bytes, which is comparing the
/// numbers.
pub type HashKey = u128;

pub(super) const FNV128_OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
const FNV128_PRIME: u128 = 0x0000000001000000000000000000013b;

/// Go's `fnv.New128a()` over `bytes`.
pub fn fnv128a(bytes: &[u8]) -> HashKey {
    fold(FNV128_OFFSET, bytes)
}

/// FNV-1a from state `h`. The prime is 2^88 + 0x13b, so the multiply is a shift and a small
/// multiply: a fraction of a full 128-bit one, on a chain as long as the text.
pub(super) fn fold(h: HashKey, bytes: &[u8]) -> HashKey {
    const LOW: u128 = FNV128_PRIME - (1 << 88);
    bytes.iter().fold(h, |h, &b| {
        let h = h ^ u128::from(b);
        (h << 88).wrapping_add(h.wrapping_mul(LOW))
    })
}

/// [`fold`] for the compiler: the tables are built when the crate is.
const fn const_fold(mut h: HashKey, bytes: &[u8]) -> HashKey {
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u128).wrapping_mul(FNV128_PRIME);
        i += 1;
    }
    h
}

/// A fixed text of a print, with its fold from each of the 256 low bytes a state can have.
pub(crate) struct Literal {
    /// Kept for the prints the tests compare.
    #[cfg(test)]
    pub text: &'static str,
    /// The prime to the power of the text's length.
    power: u128,
    table: [u128; 256],
}

impl Literal {
    pub const fn new(text: &'static str) -> Literal {
        let bytes = text.as_bytes();
        let mut table = [0; 256];
        let mut low = 0;
        while low < 256 {
            table[low] = const_fold(low as u128, bytes);
            low += 1;
        }
        let mut power: u128 = 1;
        let mut i = 0;
        while i < bytes.len() {
            power = power.wrapping_mul(FNV128_PRIME);
            i += 1;
        }
        Literal {
            #[cfg(test)]
            text,
            power,
            table,
        }
    }

    /// `fold(h, self.text)`.
    #[inline]
    pub fn fold(&self, h: HashKey) -> HashKey {
        self.table[(h & 0xff) as usize].wrapping_add((h & !0xff).wrapping_mul(self.power))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// FNV-1a as its definition reads: a full 128-bit multiply by the prime for every byte.
    fn by_definition(mut h: u128, bytes: &[u8]) -> u128 {
        for &b in bytes {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000000001000000000000000000013b);
        }
        h
    }

    const WORDS: Literal = Literal::new(" TargetRef:(*v1.ObjectReference){Kind:(string)");
    const EMPTY: Literal = Literal::new("");

    proptest! {
        #[test]
        fn a_literal_folds_as_its_bytes_do(h in any::<u128>(), text in ".{0,80}") {
            let literal = Literal {
                text: "",
                power: (0..text.len()).fold(1u128, |p, _| p.wrapping_mul(FNV128_PRIME)),
                table: std::array::from_fn(|low| by_definition(low as u128, text.as_bytes())),
            };
            prop_assert_eq!(literal.fold(h), by_definition(h, text.as_bytes()));
            prop_assert_eq!(fold(h, text.as_bytes()), by_definition(h, text.as_bytes()));
            prop_assert_eq!(WORDS.fold(h), by_definition(h, WORDS.text.as_bytes()));
            prop_assert_eq!(EMPTY.fold(h), h);
        }
    }
}
